// Proves what a standby holds around a snapshot and a new primary: while a snapshot replaces
// its replica, the replica is kept and the entries held for it go to its device when released
// (a takeover's backlog drains: failover seed 6635, where they stayed held for ever), a kept
// replica that diverges on them is dropped, and a completed snapshot still replaces it; a
// replica holding entries beyond a primary's last seq is another history and is dropped at
// the first hello of that primary's stream, which then says empty (failover seed 6495), while
// one within it resumes and a late copy of a hello changes nothing (failover seed 972).
import type { Entry, PrimaryMessage, StandbyMessage } from "@vgpu-ha/common/core";
import {
  Backend,
  computeDigest,
  digestWhenDone,
  ManualExecutor,
  SnapshotSource,
  type StateDigest,
} from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import {
  deviceTestOptions as options,
  primaryOfFive,
  type TestPrimary,
  testPrimaryHello,
} from "../testing/test-primary.js";
import { applyEntry } from "./applier.js";
import { Receiver } from "./receiver.js";

/** A replica on a device run by the test; `apply` may stand in for the applier. */
function standby(apply?: typeof applyEntry) {
  const r = new Receiver(
    { clusterId: "c", nodeId: "b", backendOptions: options(1), ...(apply ? { apply } : {}) },
    1,
  );
  const executor = new ManualExecutor();
  r.adopt(new Backend(options(1, executor)), 0);
  const run = () => executor.run(Number.POSITIVE_INFINITY);
  /** The replica's state digest, hashed on its device. */
  const digest = (): string => {
    let d: StateDigest | undefined;
    digestWhenDone(r.backend!, (x) => {
      d = x;
    });
    run();
    return d!.state;
  };
  return { r, run, digest };
}

const batch = (entries: readonly Entry[], primaryDoneSeq: number): PrimaryMessage => ({
  kind: "entries",
  epoch: 1,
  entries,
  primaryDoneSeq,
});

/** The first chunks of a snapshot of `p` at its last seq (4 KiB chunks: several of them). */
function snapshotOf(p: TestPrimary, id = 1) {
  const source = new SnapshotSource(p.backend, id, p.entries.length, 4096);
  const chunk = () => {
    const c = source.next();
    if (c === undefined) throw new Error("the snapshot source has no chunk ready");
    return { kind: "snapshot", epoch: 1, chunk: c } as const satisfies PrimaryMessage;
  };
  return { chunk };
}

const primaryHello = (lastSeq: number) => testPrimaryHello({ lastSeq });

const saysEmpty = (out: StandbyMessage) => out.kind === "hello" && out.empty;

describe("a snapshot in progress over a replica with held entries", () => {
  it("hands the held entries to the kept replica's device when released: the backlog drains", () => {
    const p = primaryOfFive();
    const { r, run, digest } = standby();
    r.step(batch(p.entries, 2)); // the primary's device did 1..2: 3..5 held
    run();
    expect(r.heldEntries).toBe(3);
    r.step(snapshotOf(p).chunk()); // chunk 0 of several: the snapshot begins
    expect(r.state).toBe("snapshot");
    expect(r.backlog).toBe(3);

    r.releaseHeld(); // the primary is gone (its lease ran out, or a takeover)
    expect(r.heldEntries).toBe(0);
    run();
    expect(r.backlog).toBe(0);
    expect(r.submittedSeq).toBe(5);
    expect(r.state).toBe("snapshot"); // the snapshot may still complete
    expect(digest()).toBe(computeDigest(p.backend).state);
  });

  it("drops a kept replica that diverges on a held entry, and the snapshot goes on", () => {
    const p = primaryOfFive();
    let refuse = 0;
    const { r, run } = standby((backend, entry) =>
      entry.seq === refuse ? { ok: false, divergence: "planted" } : applyEntry(backend, entry),
    );
    r.step(batch(p.entries, 2));
    run();
    const snapshot = snapshotOf(p);
    r.step(snapshot.chunk());
    refuse = 4;
    r.releaseHeld();
    expect(r.backend).toBeUndefined();
    expect(r.backlog).toBe(0);
    expect(r.receivedSeq).toBe(0);
    expect(r.state).toBe("snapshot");
    const dropped = r.takeEvents().find((e) => e.kind === "divergence");
    expect(dropped?.detail).toContain("kept replica dropped");

    // The rest of the snapshot installs a replica of the primary.
    for (let i = 0; i < 16 && r.state === "snapshot"; i++) r.step(snapshot.chunk());
    expect(r.state).toBe("replica");
    expect(r.receivedSeq).toBe(5);
    run();
    expect(computeDigest(r.backend!).state).toBe(computeDigest(p.backend).state);
  });

  it("leaves the kept replica alone while the entries stay held (the primary still there)", () => {
    const p = primaryOfFive();
    const { r, run } = standby();
    r.step(batch(p.entries, 2));
    run();
    r.step(snapshotOf(p).chunk());
    r.step(batch([], 5)); // entries are not taken during a snapshot, nor released
    expect(r.heldEntries).toBe(3);
    expect(r.submittedSeq).toBe(2);
  });
});

describe("a replica meeting a primary's hello", () => {
  it("is dropped when it holds entries beyond the primary's last seq: the hello says empty", () => {
    const p = primaryOfFive();
    const { r, run } = standby();
    r.step(batch(p.entries, 5));
    run();
    const old = r.backend!;
    const reply = r.answerHello(primaryHello(0)); // a primary that started the pair afresh
    expect(saysEmpty(reply)).toBe(true);
    expect(r.state).toBe("empty");
    expect(r.backend).toBeUndefined();
    expect(old).not.toBe(r.backend);
    expect(r.granted).toBe(false);
    expect(r.backlog).toBe(0);
    expect(r.takeEvents().map((e) => e.kind)).toContain("foreignReplica");
  });

  it("resumes when everything it holds is within the primary's log", () => {
    const p = primaryOfFive();
    const { r, run } = standby();
    r.step(batch(p.entries, 5));
    run();
    const hello = r.answerHello({ ...primaryHello(5), epoch: 1 });
    expect(hello).toMatchObject({ kind: "hello", empty: false, lastAppliedSeq: 5 });
    expect(r.state).toBe("replica");
    expect(r.takeEvents().map((e) => e.kind)).not.toContain("foreignReplica");
  });

  it("keeps it at a late copy of a hello (the primary repeats its own; an older one lags)", () => {
    const p = primaryOfFive();
    const { r, run } = standby();
    r.step(batch(p.entries, 5));
    run();
    const [reply] = r.step({ ...primaryHello(3), epoch: 1 });
    expect(reply).toMatchObject({ kind: "hello", empty: false });
    expect(r.state).toBe("replica");
    expect(r.receivedSeq).toBe(5);
  });
});
