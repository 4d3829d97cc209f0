// Proves the primary's side of the ack modes (issue #14): the sequencer names each entry's seq
// to the device and ships a dmaRead's output digest and a checkpoint's state digest as late
// results once the device produced them; the sender tracks the standby's received and applied
// seqs apart, sends late results after their entries (again after a resume) and keeps unsent
// ones; the machine releases on receipt (sync) or on apply (sync-applied), never past its own
// device, grants only on apply, revokes the grant at once on a divergence, and holds guests
// back on the apply lag.
import { type Call, type PrimaryMessage, ReplicationLog } from "@vgpu-ha/common/core";
import {
  Backend,
  type BackendOptions,
  digestWhenDone,
  ManualExecutor,
  summarizeResult,
} from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { MachineSetup } from "../testing/primary-machine-setup.js";
import { testSenderOptions, testStandbyHello } from "../testing/sender-options.js";
import { Sender } from "./sender.js";
import { Sequencer } from "./sequencer.js";

const backendOptions: BackendOptions = {
  device: { seed: 3, vramBytes: 1 << 20, maxBoBytes: 1 << 20, maxKernelWork: 1 << 20 },
  tenants: new Map([["t", { vramBytes: 1 << 20, bos: 8, contexts: 8 }]]),
  session: { replyCacheFrames: 16, replyCacheBytes: 1 << 16 },
  maxDmaBytes: 1 << 16,
  maxStoresPerBatch: 16,
  trackMmio: false,
};

/** A sequencer over a held device, with a session, a context and a written buffer. */
function sequenced() {
  const executor = new ManualExecutor();
  const backend = new Backend({ ...backendOptions, executor: () => executor });
  const device = {
    /** Runs every operation held (or `n`); how many ran. */
    complete: (n = Number.POSITIVE_INFINITY) => executor.run(n),
    doneSeq: (lastSeq: number) => backend.progress.doneSeq(lastSeq),
  };
  const log = new ReplicationLog();
  const seq = new Sequencer(backend, log, { mmio: "per-page", flushBytes: 4096 }, () => 0);
  seq.openSession("s", "t");
  const session = backend.sessions.get("s")!;
  let frame = 0;
  const call = (c: Call) =>
    seq.applyFrame(session, { number: ++frame, body: { kind: "call", call: c } });
  call({ op: "contextCreate" });
  call({ op: "boAlloc", context: 1, sizeBytes: 4096 });
  call({ op: "dmaWrite", context: 1, bo: 1, offset: 0, data: new Uint8Array([5, 6, 7, 8]) });
  return { backend, device, log, seq, call };
}

const lateOf = (messages: readonly PrimaryMessage[]) =>
  messages.flatMap((m) => (m.kind === "entries" ? (m.lateResults ?? []) : []));

describe("the sequencer", () => {
  it("names each entry's seq to the device before applying it", () => {
    const { device, log } = sequenced();
    expect(log.lastSeq).toBe(4);
    // The dmaWrite (seq 4) is queued: the device has not done it.
    expect(device.doneSeq(4)).toBeLessThan(4);
    const done = [device.doneSeq(4)];
    while (device.complete(1) > 0) done.push(device.doneSeq(4));
    expect(done.at(-1)).toBe(4);
    expect([...done].sort((a, b) => a - b)).toEqual(done);
  });

  it("ships a dmaRead without its digest, which follows once the device ran it", () => {
    const { device, log, call } = sequenced();
    const { outcome, seq } = call({ op: "dmaRead", context: 1, bo: 1, offset: 0, length: 4 });
    const entry = log.read(seq, 1, 1 << 20)[0]!;
    expect(entry.body).toMatchObject({ kind: "call", result: { code: 0 } });
    expect((entry.body as { result: { outputDigest: Uint8Array } }).result.outputDigest).toEqual(
      new Uint8Array(0),
    );
    expect(log.lateBetween(0, seq, 10)).toEqual([]);
    device.complete();
    expect(log.lateBetween(0, seq, 10)).toEqual([
      { seq, kind: "output", outputDigest: summarizeResult(outcome.result).outputDigest },
    ]);
  });

  it("appends a checkpoint at once; its state digest follows after the device", () => {
    const { backend, device, log, seq, call } = sequenced();
    let told = "";
    const at = seq.checkpoint(9, (d) => {
      told = d;
    });
    expect(log.read(at, 1, 1 << 20)[0]!.body).toEqual({
      kind: "checkpoint",
      digest: "",
      requestId: 9,
    });
    expect(told).toBe("");
    // A later write must not leak into the checkpoint's digest.
    call({ op: "dmaWrite", context: 1, bo: 1, offset: 0, data: new Uint8Array([9]) });
    device.complete();
    expect(told).not.toBe("");
    expect(log.lateBetween(0, at, 10)).toEqual([{ seq: at, kind: "state", digest: told }]);
    let now = "";
    digestWhenDone(backend, (d) => {
      now = d.state;
    });
    device.complete();
    expect(now).not.toBe(told);
  });
});

describe("the sender", () => {
  function streaming(log: ReplicationLog) {
    const sender = new Sender(
      testSenderOptions(),
      log,
      () => {
        throw new Error("no snapshot here");
      },
      1,
    );
    sender.connected(0);
    sender.poll(0);
    sender.step(testStandbyHello({ lastAppliedSeq: 0 }), 0);
    return sender;
  }

  const ack = (receivedSeq: number, appliedSeq: number) =>
    ({
      kind: "ack",
      epoch: 1,
      receivedSeq,
      appliedSeq,
      snapshotId: 0,
      snapshotChunk: 0,
      heartbeatSentUs: 0,
      checkpoints: [],
    }) as const;

  it("keeps the received and applied seqs apart; the window follows receipt", () => {
    const { log } = sequenced();
    const sender = streaming(log);
    sender.poll(1);
    sender.step(ack(4, 1), 2);
    expect([sender.receivedSeq, sender.appliedSeq]).toEqual([4, 1]);
    sender.step(ack(3, 2), 3); // an older ack's received seq does not go back
    expect([sender.receivedSeq, sender.appliedSeq]).toEqual([4, 2]);
  });

  it("sends late results after their entries, again after a resume, and the log keeps them until sent", () => {
    const { device, log, call } = sequenced();
    const sender = streaming(log);
    const { seq } = call({ op: "dmaRead", context: 1, bo: 1, offset: 0, length: 4 });
    const first = sender.poll(1);
    expect(first.some((m) => m.kind === "entries" && m.entries.at(-1)?.seq === seq)).toBe(true);
    expect(lateOf(first)).toEqual([]); // the device has not run it yet
    device.complete();
    // The standby applied everything: the log may drop the entries, not the unsent result.
    sender.step(ack(seq, seq), 2);
    log.release(sender.releasableSeq, 0);
    expect(log.has(seq)).toBe(false);
    expect(lateOf(sender.poll(3)).map((r) => r.seq)).toEqual([seq]);
    expect(lateOf(sender.poll(4))).toEqual([]); // sent once
    // A new stream resuming before it: sent again.
    const s2 = sequenced();
    const sender2 = streaming(s2.log);
    const read = s2.call({ op: "dmaRead", context: 1, bo: 1, offset: 0, length: 4 });
    s2.device.complete();
    expect(lateOf(sender2.poll(1)).map((r) => r.seq)).toEqual([read.seq]);
    sender2.disconnected();
    sender2.connected(5);
    sender2.poll(5);
    sender2.step(testStandbyHello({ lastAppliedSeq: read.seq - 1 }), 5);
    expect(lateOf(sender2.poll(6)).map((r) => r.seq)).toEqual([read.seq]);
  });
});

describe("the machine's release in each mode", () => {
  /** Granted, leased and streaming, with 5 entries the standby applied; then 3 more sent. */
  function granted(mode: "sync" | "sync-applied") {
    const s = new MachineSetup({ mode });
    s.machine.start(s.facts(), false);
    s.append(5);
    s.connect();
    s.ack(5);
    s.machine.progress(s.facts());
    expect(s.machine.grant.granted).toBe(true);
    s.append(3);
    s.sender.poll(s.nowMs);
    return s;
  }

  /** Sync, streaming: applied 5, received 7, released 6, so without the grant. */
  function ungranted() {
    const u = new MachineSetup({ mode: "sync" });
    u.machine.start(u.facts(), false);
    u.append(5);
    u.connect();
    u.append(2);
    u.sender.poll(u.nowMs);
    u.releasedSeq = 6;
    u.ack(5, { receivedSeq: 7 });
    u.machine.progress(u.facts());
    return u;
  }

  it("sync releases what the standby received; sync-applied what it applied", () => {
    for (const [mode, expected] of [
      ["sync", 8],
      ["sync-applied", 6],
    ] as const) {
      const s = granted(mode);
      s.ack(6, { receivedSeq: 8 });
      s.machine.progress(s.facts());
      expect(s.machine.releasable(s.facts())).toBe(expected);
    }
  });

  it("never releases past its own device", () => {
    const s = granted("sync");
    s.ack(8);
    s.deviceSeq = 7;
    expect(s.machine.releasable(s.facts())).toBe(7);
  });

  it("a standby without the grant earns it by applying (receipt does not suffice)", () => {
    const s = new MachineSetup({ mode: "sync" });
    s.machine.start(s.facts(), false);
    s.append(5);
    s.connect();
    s.append(2);
    s.sender.poll(s.nowMs);
    s.ack(0, { receivedSeq: 7 });
    s.releasedSeq = 5;
    s.machine.progress(s.facts());
    expect(s.machine.grant.granted).toBe(true); // applied 5 (the hello) covers what went out
    // Ungranted replies wait for the applied seq even in sync mode.
    const u = ungranted();
    expect(u.machine.grant.granted).toBe(false);
    expect(u.machine.releasable(u.facts())).toBe(5);
  });

  it("a divergence reported by the standby revokes the grant at once", () => {
    const s = granted("sync");
    const actions = s.machine.senderEvent(
      { kind: "resync", reason: "diverged", detail: "output differs" },
      s.nowMs,
    );
    expect(s.machine.grant.granted).toBe(false);
    expect(s.sender.syncGrant).toBe(false);
    expect(actions).toContainEqual({
      kind: "notice",
      notice: { kind: "grantChanged", granted: false },
    });
    // Until the standby echoes a heartbeat sent after the revocation, replies stay gated.
    expect(s.machine.grant.revokedAtUs).toBe(s.nowMs * 1000);
    expect(s.machine.releasable(s.facts())).toBe(s.sender.receivedSeq);
  });

  it("serves guests while a standby without the grant is far behind, and waits for it once near", () => {
    // Just after a snapshot: entries 6 and 7 went out while the standby installed it; it has
    // applied 5 and received 7, so it has not earned the grant (released 6 > applied 5).
    const u = ungranted();
    expect(u.machine.grant.granted).toBe(false);
    // Entry 6 waits 151 ms to be applied, over half of maxApplyLagMs (300): far behind, it
    // cannot take over, so replies go out and the apply-lag bound holds nobody back.
    u.at(u.nowMs + 151);
    expect(u.machine.releasable(u.facts())).toBeUndefined();
    expect(u.machine.backPressure(u.nowMs + 200)).toBe(false);
    // It applies 6 (entry 7 appended at the same time is now the oldest unapplied): still far.
    u.ack(6, { receivedSeq: 7 });
    expect(u.machine.releasable(u.facts())).toBeUndefined();
    // Two entries appended now, the older ones applied: near; replies wait for its applied seq.
    u.append(2);
    u.sender.poll(u.nowMs);
    u.ack(7, { receivedSeq: 9 });
    u.machine.progress(u.facts());
    expect(u.machine.grant.granted).toBe(true); // applied 7 covers released 6
    expect(u.machine.releasable(u.facts())).toBe(9);
    // Once granted the apply-lag bound holds guests back again.
    expect(u.machine.backPressure(u.nowMs + 301)).toBe(true);
  });

  it("holds guests back once entries wait longer than maxApplyLagMs to be applied", () => {
    const s = granted("sync");
    s.ack(5, { receivedSeq: 8 });
    expect(s.machine.backPressure(s.nowMs + 100)).toBe(false);
    expect(s.machine.backPressure(s.nowMs + 301)).toBe(true); // maxApplyLagMs 300
  });
});
