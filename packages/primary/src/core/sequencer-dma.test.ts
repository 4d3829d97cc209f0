// Proves when the sequencer copies a dmaWrite's data: with a log that keeps entries (a primary
// with a standby) the logged call owns a copy (the receive buffer it came in is not pinned, and
// later writes to that buffer do not reach the log); standalone (logKeepsEntries false: every
// entry is dropped once its message is served) it logs the data as received, no copy. Either
// way the device gets the same bytes and the guest the same result.
import { type Call, ErrorCode, type Frame, ReplicationLog } from "@vgpu-ha/common/core";
import { Backend } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { BACKEND } from "../testing/guest-sessions-world.js";
import { Sequencer } from "./sequencer.js";

function dmaWriteThrough(logKeepsEntries: boolean | undefined) {
  const backend = new Backend(BACKEND);
  const log = new ReplicationLog(0);
  const options = {
    mmio: "per-page" as const,
    flushBytes: 1 << 20,
    ...(logKeepsEntries === undefined ? {} : { logKeepsEntries }),
  };
  const sequencer = new Sequencer(backend, log, options, () => 0);
  const session = sequencer.openSession("s1", "a");
  if ("code" in session) throw new Error(session.message);
  let number = 0;
  const call = (c: Call) => {
    const frame: Frame = { number: ++number, body: { kind: "call", call: c } };
    return sequencer.applyFrame(session, frame).outcome;
  };
  const ctx = call({ op: "contextCreate" });
  const context =
    ctx.kind === "applied" && ctx.result.output.kind === "handle" ? ctx.result.output.handle : 0;
  const alloc = call({ op: "boAlloc", context, sizeBytes: 4096 });
  const bo =
    alloc.kind === "applied" && alloc.result.output.kind === "handle"
      ? alloc.result.output.handle
      : 0;
  // The data as protobuf-es decodes it: a view into a larger receive buffer.
  const received = new Uint8Array(256).map((_, i) => i);
  const data = received.subarray(100, 164);
  const written = call({ op: "dmaWrite", context, bo, offset: 8, data });
  const entry = log.read(log.lastSeq, 1, Number.POSITIVE_INFINITY)[0]!;
  if (entry.body.kind !== "call" || entry.body.call.op !== "dmaWrite") throw new Error("no entry");
  const logged = entry.body.call.data;
  const readBack = call({ op: "dmaRead", context, bo, offset: 8, length: 64 });
  return { written, logged, data, received, readBack };
}

describe("Sequencer: a dmaWrite's data in the log", () => {
  it("is a copy of its own when the log keeps entries (the default)", () => {
    for (const keeps of [undefined, true]) {
      const t = dmaWriteThrough(keeps);
      expect(t.written.kind === "applied" && t.written.result.code).toBe(ErrorCode.OK);
      expect(t.logged).not.toBe(t.data);
      expect(t.logged.buffer).not.toBe(t.received.buffer);
      expect(t.logged.byteLength).toBe(t.logged.buffer.byteLength);
      expect([...t.logged]).toEqual([...t.data]);
      t.received.fill(0); // the receive buffer reused or zeroed: the log is unaffected
      expect(t.logged[0]).toBe(100);
    }
  });

  it("is the received view, not copied, standalone", () => {
    const t = dmaWriteThrough(false);
    expect(t.written.kind === "applied" && t.written.result.code).toBe(ErrorCode.OK);
    expect(t.logged).toBe(t.data);
  });

  it("reaches the device as the same bytes either way", () => {
    const reads = [true, false].map((keeps) => {
      const r = dmaWriteThrough(keeps).readBack;
      if (r.kind !== "applied" || r.result.output.kind !== "data") throw new Error("no read");
      return [...r.result.output.data];
    });
    expect(reads[0]).toEqual(Array.from({ length: 64 }, (_, i) => 100 + i));
    expect(reads[1]).toEqual(reads[0]);
  });
});
