// The rule for a frame a failed device was running (Sequencer.faultFrames): a new primary that
// never applied it answers its re-send DEVICE_FAULT without running it, once, through the log
// (a page batch with no pages carries the record, so its standby caches the same reply); one
// it had applied keeps its cached reply. Checked on a real backend: the kernel's effect is
// absent, frame numbers and cached replies are what the guest and the standby see.
import { type Call, ErrorCode, type Frame, ReplicationLog } from "@vgpu-ha/common/core";
import { Backend } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { BACKEND } from "../testing/guest-sessions-world.js";
import { Sequencer } from "./sequencer.js";

function setup() {
  const backend = new Backend(BACKEND);
  const log = new ReplicationLog(0);
  const sequencer = new Sequencer(backend, log, { mmio: "per-page", flushBytes: 1 << 20 }, () => 0);
  const session = sequencer.openSession("s1", "a");
  if ("code" in session) throw new Error(session.message);
  let number = 0;
  const call = (c: Call) => {
    const frame: Frame = { number: ++number, body: { kind: "call", call: c } };
    return sequencer.applyFrame(session, frame);
  };
  const ctx = call({ op: "contextCreate" }).outcome.result.output;
  if (ctx.kind !== "handle") throw new Error("no context");
  const bo = call({ op: "boAlloc", context: ctx.handle, sizeBytes: 4096 }).outcome.result.output;
  if (bo.kind !== "handle") throw new Error("no buffer");
  const increment: Call = {
    op: "kernelLaunch",
    context: ctx.handle,
    kernel: "increment_u32",
    args: [
      { kind: "buffer", bo: bo.handle },
      { kind: "u32", value: 4 },
      { kind: "u32", value: 1 },
    ],
  };
  const read = (): number => {
    const r = call({ op: "dmaRead", context: ctx.handle, bo: bo.handle, offset: 0, length: 4 });
    const out = r.outcome.result.output;
    if (out.kind !== "data") throw new Error("no data");
    return new Uint32Array(out.data.slice().buffer)[0]!;
  };
  const resend = (n: number, c: Call) =>
    sequencer.applyFrame(session, { number: n, body: { kind: "call", call: c } });
  return {
    backend,
    log,
    sequencer,
    session,
    call,
    increment,
    read,
    resend,
    next: () => number + 1,
  };
}

describe("Sequencer: frames a failed device was running", () => {
  it("a faulted frame it does not have is answered DEVICE_FAULT, not run, and logged for the standby", () => {
    const t = setup();
    const faulted = t.next();
    t.sequencer.faultFrames([{ sessionId: "s1", frame: faulted, seq: 99 }]);
    const before = t.log.lastSeq;
    const sent = t.call(t.increment);
    expect(sent.outcome.kind).toBe("applied");
    expect(sent.outcome.result.code).toBe(ErrorCode.DEVICE_FAULT);
    expect(sent.seq).toBe(before + 1);
    const [entry] = t.log.read(sent.seq, 1, 1 << 20);
    expect(entry?.body).toEqual({
      kind: "mmioPages",
      pages: [],
      frames: [
        {
          sessionId: "s1",
          frame: faulted,
          code: ErrorCode.DEVICE_FAULT,
          message: expect.stringContaining("not run again"),
        },
      ],
    });
    expect(t.session.lastFrame).toBe(faulted);
    expect(t.read()).toBe(0); // the increment never ran
    // Re-sent again: the cached DEVICE_FAULT, still not run.
    const again = t.resend(faulted, t.increment);
    expect(again.outcome.kind).toBe("duplicate");
    expect(again.outcome.result.code).toBe(ErrorCode.DEVICE_FAULT);
    // The same number is not faulted twice: the session's next frames run as usual.
    expect(t.call(t.increment).outcome.result.code).toBe(ErrorCode.OK);
    expect(t.read()).toBe(1);
  });

  it("a faulted frame it already applied keeps its cached reply", () => {
    const t = setup();
    const applied = t.next();
    expect(t.call(t.increment).outcome.result.code).toBe(ErrorCode.OK);
    t.sequencer.faultFrames([{ sessionId: "s1", frame: applied, seq: 7 }]);
    const lastSeq = t.log.lastSeq;
    const again = t.resend(applied, t.increment);
    expect(again.outcome.kind).toBe("duplicate");
    expect(again.outcome.result.code).toBe(ErrorCode.OK);
    expect(t.log.lastSeq).toBe(lastSeq);
    expect(t.read()).toBe(1); // ran once
  });

  it("the standby records the same reply from the page batch", () => {
    const t = setup();
    const standby = new Backend({ ...BACKEND, device: { ...BACKEND.device, seed: 77 } });
    const opened = standby.openSession("s1", "a");
    if ("code" in opened) throw new Error(opened.message);
    const faulted = t.next();
    // The standby has applied frames 1..faulted-1 (lastFrame as on the primary).
    opened.lastFrame = faulted - 1;
    t.sequencer.faultFrames([{ sessionId: "s1", frame: faulted, seq: 5 }]);
    const sent = t.call(t.increment);
    const [entry] = t.log.read(sent.seq, 1, 1 << 20);
    if (entry?.body.kind !== "mmioPages") throw new Error("no page batch");
    expect(standby.recordFrame(entry.body.frames[0]!)).toBeNull();
    expect(opened.lastFrame).toBe(faulted);
    expect(opened.replies.get(faulted)?.code).toBe(ErrorCode.DEVICE_FAULT);
  });
});
