// Proves, with the shipped cores end to end in memory (the primary's Sequencer and Sender, the
// standby's Receiver, inline devices), that a standby holding a replica of another history — it
// followed primary X — is caught when primary Y of another lineage connects, though X's log is
// as long as Y's or shorter (the length check of before lineages cannot tell): the replica is
// dropped, Y sends a snapshot, and the standby ends equal to Y. The two histories run the same
// calls with the same results and write other bytes, so no result check tells them apart:
// without lineages (builds from before them) the same standby resumes X's replica as if it were
// Y's prefix and ends unequal to Y with nothing said — the hole the lineage closes.
import {
  type Call,
  type PrimaryMessage,
  ReplicationLog,
  type StandbyMessage,
} from "@vgpu-ha/common";
import { Backend, type BackendOptions, computeDigest, SnapshotSource } from "@vgpu-ha/gpu-model";
import { Sender, Sequencer } from "@vgpu-ha/primary";
import { Receiver } from "@vgpu-ha/standby";
import { describe, expect, it } from "vitest";
import { testSenderOptions } from "./sender-options.js";

const OPTIONS: BackendOptions = {
  device: { seed: 5, vramBytes: 1 << 20, maxBoBytes: 1 << 20, maxKernelWork: 1 << 20 },
  tenants: new Map([["t", { vramBytes: 1 << 20, bos: 8, contexts: 8 }]]),
  session: { replyCacheFrames: 16, replyCacheBytes: 1 << 16 },
  maxDmaBytes: 1 << 16,
  maxStoresPerBatch: 16,
  trackMmio: true,
};

interface History {
  readonly backend: Backend;
  readonly log: ReplicationLog;
  readonly sender: Sender;
}

/**
 * A primary whose guest made a context and a buffer and then wrote `writes` times into it,
 * each write's bytes `fill`: histories of the same calls and results, other bytes — nothing a
 * result check can tell apart — of lineage `lineage`.
 */
function history(fill: number, writes: number, lineage: string): History {
  const backend = new Backend(OPTIONS);
  backend.lineage = lineage;
  const log = new ReplicationLog();
  const sequencer = new Sequencer(backend, log, { mmio: "per-page", flushBytes: 4096 }, () => 0);
  const session = sequencer.openSession("s", "t");
  if ("code" in session) throw new Error(session.message);
  const calls: Call[] = [
    { op: "contextCreate" },
    { op: "boAlloc", context: 1, sizeBytes: 1 << 16 },
    ...Array.from(
      { length: writes },
      (_, i): Call => ({
        op: "dmaWrite",
        context: 1,
        bo: 1,
        offset: (i % 16) * 4096,
        data: new Uint8Array(512).fill(fill),
      }),
    ),
  ];
  for (const [i, call] of calls.entries()) {
    sequencer.applyFrame(session, { number: i + 1, body: { kind: "call", call } });
  }
  let nextSnapshot = 1;
  const sender = new Sender(
    testSenderOptions({ heartbeatMs: 10, retransmitMs: 1000 }),
    log,
    () => new SnapshotSource(backend, nextSnapshot++, log.lastSeq, 16384),
    1,
  );
  sender.lineage = lineage;
  return { backend, log, sender };
}

/** Runs one connection between a primary and the standby until the standby has everything. */
function connect(p: History, standby: Receiver): void {
  let nowMs = 0;
  p.sender.connected(nowMs);
  standby.disconnected();
  let helloAnswered = false;
  const deliver = (m: PrimaryMessage): StandbyMessage[] => {
    if (m.kind !== "hello" || helloAnswered) return standby.step(m);
    helloAnswered = true;
    return [standby.answerHello(m)];
  };
  for (let round = 0; round < 10_000; round++) {
    nowMs += 5;
    const up = p.sender.poll(nowMs).flatMap(deliver);
    up.push(...standby.poll());
    for (const m of up) p.sender.step(m, nowMs);
    const done = p.sender.state === "streaming" && p.sender.appliedSeq === p.log.lastSeq;
    if (done && standby.receivedSeq === p.log.lastSeq) return;
  }
  throw new Error(`the standby never caught up: ${p.sender.state} ${p.sender.appliedSeq}`);
}

/** A standby that followed primary X to the end of its log. */
function followerOf(x: History): Receiver {
  const options = { ...x.backend.options, trackMmio: false };
  const standby = new Receiver({ clusterId: "c", nodeId: "b", backendOptions: options }, 1);
  connect(x, standby);
  expect(computeDigest(standby.backend!).state).toBe(computeDigest(x.backend).state);
  return standby;
}

describe("a standby holding a replica of another history", () => {
  it.each([
    ["as long as", 20, 20],
    ["shorter than", 12, 20],
  ])("X's log %s Y's: dropped, and Y's snapshot makes it Y's replica", (_, xWrites, yWrites) => {
    const x = history(1, xWrites, "history-x");
    const y = history(2, yWrites, "history-y");
    const standby = followerOf(x);
    expect(standby.receivedSeq).toBeLessThanOrEqual(y.log.lastSeq);
    standby.takeEvents();
    connect(y, standby);
    const events = standby.takeEvents().map((e) => e.kind);
    expect(events).toContain("foreignReplica");
    expect(events).toContain("snapshotDone");
    expect(standby.backend!.lineage).toBe("history-y");
    expect(computeDigest(standby.backend!).state).toBe(computeDigest(y.backend).state);
  });

  it("without lineages (builds from before them): resumed as Y's prefix, silently unequal", () => {
    const x = history(1, 12, "");
    const y = history(2, 20, "");
    const standby = followerOf(x);
    standby.takeEvents();
    connect(y, standby); // it "catches up" with Y's entries after X's seq
    const events = standby.takeEvents().map((e) => e.kind);
    expect(events).toEqual([]); // no foreign replica, no divergence, no snapshot
    expect(standby.receivedSeq).toBe(y.log.lastSeq);
    expect(computeDigest(standby.backend!).state).not.toBe(computeDigest(y.backend).state);
  });
});
