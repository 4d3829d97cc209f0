// Proves the standby's hold (a frame that hangs a device never runs on both nodes at once):
// while the primary's batches carry its device's done seq, received entries are acknowledged
// as received at once but reach the standby's device only once the primary's device has done
// them; a batch without the done seq releases them; late results of held entries still settle;
// and at a takeover the frame a DeviceFault named is recorded DEVICE_FAULT without running
// while every other held entry (the frame queued behind it included) is applied.
import {
  deviceFaultRecord,
  type Entry,
  type EntryBody,
  ErrorCode,
  type PrimaryMessage,
  type StandbyMessage,
} from "@vgpu-ha/common/core";
import {
  Backend,
  computeDigest,
  digestWhenDone,
  ManualExecutor,
  type StateDigest,
} from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { deviceTestOptions, TestPrimary } from "../testing/test-primary.js";
import { Receiver } from "./receiver.js";

const options = deviceTestOptions;

/** The primary's side (seq 1 opens session "s"). */
class Primary extends TestPrimary {}

function standby() {
  const r = new Receiver({ clusterId: "c", nodeId: "b", backendOptions: options(1) }, 1);
  const executor = new ManualExecutor();
  r.adopt(new Backend(options(1, executor)), 0);
  const run = () => executor.run(Number.POSITIVE_INFINITY);
  /** The replica's digest, hashed on its device. */
  const digest = (): StateDigest => {
    let d: StateDigest | undefined;
    digestWhenDone(r.backend!, (x) => {
      d = x;
    });
    run();
    return d!;
  };
  return { r, run, digest };
}

const batch = (entries: readonly Entry[], primaryDoneSeq?: number): PrimaryMessage => ({
  kind: "entries",
  epoch: 1,
  entries,
  ...(primaryDoneSeq === undefined ? {} : { primaryDoneSeq }),
});

const lastAck = (out: readonly StandbyMessage[]) =>
  out.filter((m): m is Extract<StandbyMessage, { kind: "ack" }> => m.kind === "ack").at(-1)!;

const data = (b: number) => new Uint8Array(8).fill(b);

/** A context, a buffer and two writes to it: seqs 2..5. */
function fourCalls(p: Primary): number[] {
  return [
    p.call({ op: "contextCreate" }),
    p.call({ op: "boAlloc", context: 1, sizeBytes: 4096 }),
    p.call({ op: "dmaWrite", context: 1, bo: 1, offset: 0, data: data(1) }),
    p.call({ op: "dmaWrite", context: 1, bo: 1, offset: 8, data: data(2) }),
  ];
}

describe("a holding standby", () => {
  it("acks receipt at once and hands entries to its device only up to the primary's done seq", () => {
    const p = new Primary();
    fourCalls(p);
    const { r, run, digest } = standby();
    const ack = lastAck(r.step(batch(p.entries, 0)));
    expect(ack.receivedSeq).toBe(5);
    expect(ack.appliedSeq).toBe(0);
    expect(r.heldEntries).toBe(5);
    expect(r.submittedSeq).toBe(0);
    expect(r.backend!.sessions.has("s")).toBe(false); // not even the metadata ran
    expect(r.backlog).toBe(5);

    // The primary's device did seqs 1..3: those go to our device, 4 and 5 wait.
    r.step(batch([], 3));
    expect(r.submittedSeq).toBe(3);
    expect(r.heldEntries).toBe(2);
    run();
    expect(lastAck(r.poll()).appliedSeq).toBe(3);

    r.step(batch([], 5));
    run();
    expect(r.heldEntries).toBe(0);
    expect(r.appliedSeq).toBe(5);
    expect(digest().gpu).toBe(computeDigest(p.backend).gpu);
  });

  it("never goes back on an older done seq (a late copy), and a batch without one releases all", () => {
    const p = new Primary();
    fourCalls(p);
    const { r } = standby();
    r.step(batch(p.entries.slice(0, 3), 2));
    r.step(batch([], 1)); // an older copy
    expect(r.primaryDoneSeq).toBe(2);
    expect(r.submittedSeq).toBe(2);
    r.step(batch(p.entries.slice(3))); // a primary that does not hold
    expect(r.holdingDevice).toBe(false);
    expect(r.submittedSeq).toBe(5);
    expect(r.heldEntries).toBe(0);
  });

  it("settles a held dmaRead's comparison when its late result comes with the done seq", () => {
    const p = new Primary();
    fourCalls(p);
    const read = p.call({ op: "dmaRead", context: 1, bo: 1, offset: 0, length: 16 });
    const { r, run } = standby();
    r.step(batch(p.entries, 5));
    expect(r.heldEntries).toBe(1);
    const outputDigest = p.outputs.get(read)!;
    r.step({
      kind: "entries",
      epoch: 1,
      entries: [],
      lateResults: [{ seq: read, kind: "output", outputDigest }],
      primaryDoneSeq: read,
    });
    run();
    r.poll();
    expect(r.openLateChecks).toBe(0);
    expect(r.lateUnchecked).toBe(0);
    expect(r.state).toBe("replica");
  });
});

describe("a takeover with held entries", () => {
  it("records the faulted frame as DEVICE_FAULT without running it and applies the rest", () => {
    const p = new Primary();
    const [, , hung, behind] = fourCalls(p);
    const { r, run, digest } = standby();
    r.step(batch(p.entries, hung! - 1)); // the primary's device never finished `hung`
    const faulted = p.entries[hung! - 1]!.body as Extract<EntryBody, { kind: "call" }>;
    r.step({
      kind: "deviceFault",
      epoch: 1,
      frames: [{ sessionId: "s", frame: faulted.frame, seq: hung! }],
      reason: "work past device.maxCallMs",
    });
    expect(r.heldEntries).toBe(2);
    r.releaseHeld();
    run();
    expect(r.heldEntries).toBe(0);
    expect(r.backlog).toBe(0);
    expect(r.faultedNotRun).toBe(1);
    expect(r.events.map((e) => e.kind)).toContain("faultedNotRun");
    expect(r.submittedSeq).toBe(behind);

    // The session consumed the faulted frame: a re-send is answered DEVICE_FAULT (cached).
    const session = r.backend!.sessions.get("s")!;
    expect(session.lastFrame).toBe(faulted.frame + 1);
    const again = r.backend!.applyFrame(session, {
      number: faulted.frame,
      body: { kind: "call", call: faulted.call },
    });
    expect(again.kind).toBe("duplicate");
    expect(again.result.code).toBe(ErrorCode.DEVICE_FAULT);

    // The state: the frame behind it ran, the faulted one did not (a reference built so).
    const reference = new Backend(options(9));
    reference.openSession("s", "t");
    const ref = reference.sessions.get("s")!;
    for (const e of p.entries.slice(1)) {
      const b = e.body as Extract<EntryBody, { kind: "call" }>;
      if (e.seq === hung) reference.recordFrame(deviceFaultRecord("s", b.frame));
      else reference.applyFrame(ref, { number: b.frame, body: { kind: "call", call: b.call } });
    }
    const mine = digest().state;
    expect(mine).toBe(computeDigest(reference).state);
    expect(mine).not.toBe(computeDigest(p.backend).state);
  });

  it("runs every held entry when no notice named one (a primary that crashed plainly)", () => {
    const p = new Primary();
    fourCalls(p);
    const { r, run, digest } = standby();
    r.step(batch(p.entries, 1));
    r.releaseHeld();
    run();
    expect(r.faultedNotRun).toBe(0);
    expect(r.appliedSeq).toBe(5);
    expect(digest().state).toBe(computeDigest(p.backend).state);
  });
});
