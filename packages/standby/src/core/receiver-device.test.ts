// Proves the standby follows its device (issue #14): an entry counts as received once handed to
// the backend and as applied only once the device completed it (acks carry both, poll() acks
// device progress), and results that need the device — a dmaRead's output digest, a
// checkpoint's state digest — are compared when both the primary's late result and our own
// device's are in, whichever comes first; a mismatch found then is divergence.
import type { Entry, EntryBody, PrimaryMessage, StandbyMessage } from "@vgpu-ha/common/core";
import { ErrorCode } from "@vgpu-ha/common/core";
import { Backend, type BackendOptions, computeDigest, summarizeResult } from "@vgpu-ha/gpu-model";
import { type HeldProgress, holdDevice } from "@vgpu-ha/gpu-model/testing/held-progress";
import { describe, expect, it } from "vitest";
import { Receiver } from "./receiver.js";

const options = (seed: number): BackendOptions => ({
  device: { seed, vramBytes: 1 << 20, maxBoBytes: 1 << 20, maxKernelWork: 1 << 20 },
  tenants: new Map([["t", { vramBytes: 1 << 20, bos: 8, contexts: 8 }]]),
  session: { replyCacheFrames: 16, replyCacheBytes: 1 << 16 },
  maxDmaBytes: 1 << 16,
  maxStoresPerBatch: 16,
  trackMmio: false,
});

const NO_DIGEST = new Uint8Array(0);
const data = new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]);

/** The primary's side: a backend of another seed; entries as the sequencer makes them. */
class Primary {
  readonly backend = new Backend(options(7));
  readonly entries: Entry[] = [];
  /** The output digests the primary's device produced, by seq. */
  readonly outputs = new Map<number, Uint8Array>();
  private frame = 0;

  constructor() {
    this.backend.openSession("s", "t");
    this.push({ kind: "sessionOpen", sessionId: "s", tenant: "t" });
    this.call({ op: "contextCreate" });
    this.call({ op: "boAlloc", context: 1, sizeBytes: 4096 });
    this.call({ op: "dmaWrite", context: 1, bo: 1, offset: 0, data });
  }

  call(call: Extract<EntryBody, { kind: "call" }>["call"]): number {
    const session = this.backend.sessions.get("s")!;
    const number = ++this.frame;
    const outcome = this.backend.applyFrame(session, { number, body: { kind: "call", call } });
    const summary = summarizeResult(outcome.result);
    const late = outcome.result.output.kind === "data";
    const seq = this.push({
      kind: "call",
      sessionId: "s",
      frame: number,
      call,
      handles: { contextsCreated: [], contextsDestroyed: [], bosAssigned: [], bosReleased: [] },
      result: late ? { code: summary.code, outputDigest: NO_DIGEST } : summary,
    });
    if (late) this.outputs.set(seq, summary.outputDigest);
    return seq;
  }

  push(body: EntryBody): number {
    const seq = this.entries.length + 1;
    this.entries.push({ seq, body });
    return seq;
  }
}

function standby(): { r: Receiver; device: HeldProgress } {
  const r = new Receiver({ clusterId: "c", nodeId: "b", backendOptions: options(1) }, 1);
  const backend = new Backend(options(1));
  const device = holdDevice(backend);
  r.adopt(backend, 0);
  return { r, device };
}

const batch = (entries: readonly Entry[]): PrimaryMessage => ({
  kind: "entries",
  epoch: 1,
  entries,
});

const late = (seq: number, outputDigest: Uint8Array): PrimaryMessage => ({
  kind: "entries",
  epoch: 1,
  entries: [],
  lateResults: [{ seq, kind: "output", outputDigest }],
});

const acks = (out: readonly StandbyMessage[]) =>
  out.filter((m): m is Extract<StandbyMessage, { kind: "ack" }> => m.kind === "ack");

describe("received and applied", () => {
  it("acks receipt at once and applied progress as the device completes", () => {
    const p = new Primary();
    const { r, device } = standby();
    const ack = acks(r.step(batch(p.entries))).at(-1)!;
    expect(ack).toMatchObject({ receivedSeq: 4, appliedSeq: 0 });
    expect(r.backlog).toBe(4);
    expect(r.poll()).toEqual([]); // nothing new
    device.complete(2);
    expect(acks(r.poll())[0]).toMatchObject({ receivedSeq: 4, appliedSeq: 2 });
    device.complete();
    expect(acks(r.poll())[0]).toMatchObject({ receivedSeq: 4, appliedSeq: 4 });
    expect(r.backlog).toBe(0);
    expect(r.poll()).toEqual([]);
  });

  it("skips what it received already (a resend after the primary resumed from applied)", () => {
    const p = new Primary();
    const { r, device } = standby();
    r.step(batch(p.entries));
    expect(r.hello()).toMatchObject({ lastAppliedSeq: 0 });
    const again = acks(r.step(batch(p.entries))).at(-1)!;
    expect(again).toMatchObject({ receivedSeq: 4, appliedSeq: 0 });
    device.complete();
    expect(computeDigest(r.backend!).gpu).toBe(computeDigest(p.backend).gpu);
  });
});

describe("late results", () => {
  it("compares a dmaRead's output once both digests are in, in either order", () => {
    for (const primaryFirst of [true, false]) {
      const p = new Primary();
      const seq = p.call({ op: "dmaRead", context: 1, bo: 1, offset: 0, length: 8 });
      const { r, device } = standby();
      r.step(batch(p.entries));
      if (primaryFirst) r.step(late(seq, p.outputs.get(seq)!));
      expect(r.openLateChecks).toBe(1);
      device.complete();
      if (!primaryFirst) r.step(late(seq, p.outputs.get(seq)!));
      r.poll();
      expect(r.openLateChecks).toBe(0);
      expect(r.state).toBe("replica");
    }
  });

  it("a differing output found after the receipt ack is divergence, with a resync", () => {
    const p = new Primary();
    const seq = p.call({ op: "dmaRead", context: 1, bo: 1, offset: 0, length: 8 });
    const { r, device } = standby();
    expect(acks(r.step(batch(p.entries))).at(-1)!.receivedSeq).toBe(seq);
    device.complete();
    const out = r.step(late(seq, new Uint8Array(16).fill(9)));
    expect(r.state).toBe("diverged");
    expect(r.eligible).toBe(false);
    expect(out.find((m) => m.kind === "resync")).toMatchObject({ reason: "diverged" });
    expect(r.takeEvents().map((e) => e.kind)).toContain("divergence");
  });

  it("a checkpoint is answered once the device reached it and the primary's digest came", () => {
    const p = new Primary();
    const digest = computeDigest(p.backend).state;
    const seq = p.push({ kind: "checkpoint", digest: "", requestId: 5 });
    const { r, device } = standby();
    r.step(batch(p.entries));
    expect(acks(r.poll()).flatMap((a) => a.checkpoints)).toEqual([]);
    r.step({
      kind: "entries",
      epoch: 1,
      entries: [],
      lateResults: [{ seq, kind: "state", digest }],
    });
    device.complete();
    const answered = acks(r.poll()).flatMap((a) => a.checkpoints);
    expect(answered).toEqual([{ requestId: 5, seq, equal: true, digest }]);
  });

  it("a checkpoint digest that differs is divergence (reported in the ack too)", () => {
    const p = new Primary();
    const seq = p.push({ kind: "checkpoint", digest: "ab".repeat(32), requestId: 6 });
    const { r, device } = standby();
    r.step(batch(p.entries));
    device.complete();
    const out = r.poll();
    expect(r.state).toBe("diverged");
    expect(acks(out).flatMap((a) => a.checkpoints)).toMatchObject([
      { requestId: 6, seq, equal: false },
    ]);
    expect(out.some((m) => m.kind === "resync")).toBe(true);
  });

  it("drops, at the next hello, checks whose primary part went with a broken link", () => {
    const p = new Primary();
    p.call({ op: "dmaRead", context: 1, bo: 1, offset: 0, length: 8 });
    const { r, device } = standby();
    r.step(batch(p.entries));
    device.complete();
    r.poll();
    expect(r.openLateChecks).toBe(1);
    r.disconnected();
    r.hello();
    expect(r.openLateChecks).toBe(0);
    expect(r.lateUnchecked).toBe(1);
  });

  it("refuses nothing of an older primary that sent the digest in the entry", () => {
    const p = new Primary();
    const seq = p.call({ op: "dmaRead", context: 1, bo: 1, offset: 0, length: 8 });
    const e = p.entries[seq - 1]!;
    const body = e.body as Extract<EntryBody, { kind: "call" }>;
    p.entries[seq - 1] = {
      seq,
      body: { ...body, result: { code: ErrorCode.OK, outputDigest: p.outputs.get(seq)! } },
    };
    const { r, device } = standby();
    r.step(batch(p.entries));
    device.complete();
    r.poll();
    expect(r.openLateChecks).toBe(0);
    expect(r.state).toBe("replica");
  });
});
