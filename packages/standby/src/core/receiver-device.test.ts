// Proves the standby follows its device (issue #14): an entry counts as received once handed to
// the backend and as applied only once the device completed it (acks carry both, poll() acks
// device progress), and results that need the device — a dmaRead's output digest, a
// checkpoint's state digest — are compared when both the primary's late result and our own
// device's are in, whichever comes first; a mismatch found then is divergence.
import type { Entry, EntryBody, PrimaryMessage, StandbyMessage } from "@vgpu-ha/common/core";
import { ErrorCode } from "@vgpu-ha/common/core";
import { Backend, computeDigest, digestWhenDone, ManualExecutor } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { deviceTestOptions, TestPrimary } from "../testing/test-primary.js";
import { Receiver } from "./receiver.js";

const options = deviceTestOptions;

const data = new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]);

/** The primary's side, with a context, a buffer and a write to it (seqs 2..4). */
class Primary extends TestPrimary {
  constructor() {
    super();
    this.call({ op: "contextCreate" });
    this.call({ op: "boAlloc", context: 1, sizeBytes: 4096 });
    this.call({ op: "dmaWrite", context: 1, bo: 1, offset: 0, data });
  }
}

/** A standby whose device runs only when the test says (complete: all, or `n` operations). */
function standby() {
  const r = new Receiver({ clusterId: "c", nodeId: "b", backendOptions: options(1) }, 1);
  const executor = new ManualExecutor();
  r.adopt(new Backend(options(1, executor)), 0);
  const device = {
    complete: (ops = Number.POSITIVE_INFINITY) => executor.run(ops),
  };
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
    expect(ack.receivedSeq).toBe(4);
    expect(ack.appliedSeq).toBeLessThan(4);
    expect(r.backlog).toBe(4 - ack.appliedSeq);
    expect(r.poll()).toEqual([]); // nothing new
    // One operation at a time: each poll acks the applied seq the device reached, upwards.
    const applied = [ack.appliedSeq];
    while (device.complete(1) > 0) {
      for (const a of acks(r.poll())) {
        expect(a.receivedSeq).toBe(4);
        expect(a.appliedSeq).toBeGreaterThan(applied.at(-1)!);
        applied.push(a.appliedSeq);
      }
    }
    expect(applied.at(-1)).toBe(4);
    expect(r.backlog).toBe(0);
    expect(r.poll()).toEqual([]);
  });

  it("skips what it received already (a resend after the primary resumed from applied)", () => {
    const p = new Primary();
    const { r, device } = standby();
    r.step(batch(p.entries));
    expect(r.hello()).toMatchObject({ lastAppliedSeq: r.appliedSeq });
    expect(r.appliedSeq).toBeLessThan(4); // resumed from there, the primary resends the rest
    const again = acks(r.step(batch(p.entries))).at(-1)!;
    expect(again.receivedSeq).toBe(4);
    expect(again.appliedSeq).toBeLessThan(4);
    device.complete();
    let mine = "";
    digestWhenDone(r.backend!, (d) => {
      mine = d.gpu;
    });
    device.complete(); // the hashing itself runs on the device
    expect(mine).toBe(computeDigest(p.backend).gpu);
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
    const before = r.step(batch(p.entries));
    expect(before.some((m) => m.kind === "resync")).toBe(false); // not until the device hashed
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

describe("a handover's digest", () => {
  const handover = (lastSeq: number, digest: string): PrimaryMessage => ({
    kind: "handover",
    epoch: 1,
    lastSeq,
    digest,
  });

  it("is taken through the device: the acceptance goes out once it has hashed the replica", () => {
    const p = new Primary();
    const { r, device } = standby();
    r.step(batch(p.entries));
    device.complete();
    r.poll();
    const primaryDigest = computeDigest(p.backend).state;
    expect(r.step(handover(4, ""))).toHaveLength(1); // announced: ours is being hashed
    const early = r.step(handover(4, primaryDigest));
    expect(early.some((m) => m.kind === "ack" && m.handoverAccepted)).toBe(false);
    device.complete();
    const later = r.poll();
    expect(later.some((m) => m.kind === "ack" && m.handoverAccepted)).toBe(true);
    expect(r.eligible).toBe(true);
    expect(r.takeEvents().map((e) => e.kind)).toContain("handover");
  });

  it("at once when the announced digest is in; a differing one is divergence", () => {
    const p = new Primary();
    const { r, device } = standby();
    r.step(batch(p.entries));
    device.complete();
    r.step(handover(4, ""));
    device.complete();
    const out = r.step(handover(4, "0".repeat(64)));
    expect(r.state).toBe("diverged");
    expect(out.some((m) => m.kind === "resync")).toBe(true);
  });

  it("waits for the device's backlog (the digest is hashed after it), and is refused short of the seq", () => {
    const p = new Primary();
    const { r, device } = standby();
    r.step(batch(p.entries.slice(0, 3)));
    r.step(handover(4, computeDigest(p.backend).state));
    expect(r.takeEvents().map((e) => e.kind)).toContain("handoverRefused");
    r.step(batch(p.entries));
    const out = r.step(handover(4, computeDigest(p.backend).state));
    expect(out.some((m) => m.kind === "ack" && m.handoverAccepted)).toBe(false);
    device.complete();
    expect(r.poll().some((m) => m.kind === "ack" && m.handoverAccepted)).toBe(true);
  });
});
