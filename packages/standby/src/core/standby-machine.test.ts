// Proves the standby machine's decisions, driven by hand as its driver would: in peer mode an
// eligible replica promotes once per lease expiry (parking guests first), an ineligible one or
// one in maintenance mode says so once per expiry, a self-pause is detected and not taken for
// an expiry; a handover promotes at once (peer mode) or once the key is taken (etcd mode); in
// etcd mode the key is read at the poll interval, the peer is probed only when the record
// alone does not decide, an ungranted replica on the peer is waited for, and answers to no
// request under way are ignored; a takeover waits for the received backlog, and in peer mode the
// old primary speaking meanwhile calls it off; a replica's device that fails ends every
// takeover (a waiting one is given up) and is reported to the node once. Properties
// (fast-check): whatever the inputs, at most one promote comes out, every promote comes after a
// park, and no request overlaps another.
import type { PeerView } from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type EtcdReading,
  HANDOVER_POLL_MS,
  PARK_MS,
  type StandbyAction,
  type StandbyFacts,
  StandbyMachine,
} from "./standby-machine.js";

const LEASE = { leaseMs: 500, heartbeatMs: 100, driftMarginMs: 50, maxDriftRatio: 0.01 };
const TICK_MS = 50;
const POLL_MS = 200;

const ELIGIBLE: StandbyFacts = {
  eligible: true,
  holdsReplica: true,
  maintenancePaused: false,
  epoch: 3,
  backlog: 0,
};
const EMPTY: StandbyFacts = { ...ELIGIBLE, eligible: false, holdsReplica: false };
const UNGRANTED: StandbyFacts = { ...ELIGIBLE, eligible: false };

function peerMode(configuredPrimary = false): StandbyMachine {
  return new StandbyMachine({
    nodeId: "b",
    configuredPrimary,
    lease: LEASE,
    etcdPollMs: undefined,
  });
}

function etcdMode(configuredPrimary = false): StandbyMachine {
  return new StandbyMachine({ nodeId: "b", configuredPrimary, lease: LEASE, etcdPollMs: POLL_MS });
}

const kinds = (actions: readonly StandbyAction[]) => actions.map((a) => a.kind);
const notes = (actions: readonly StandbyAction[]) =>
  actions.flatMap((a) => (a.kind === "note" ? [a.note.kind] : []));
const promotes = (actions: readonly StandbyAction[]) =>
  actions.filter((a): a is Extract<StandbyAction, { kind: "promote" }> => a.kind === "promote");

/** Ticks every TICK_MS from `fromMs` to `toMs` with the primary last heard at `heardMs`. */
function ticks(
  m: StandbyMachine,
  fromMs: number,
  toMs: number,
  heardMs: number | undefined,
  facts: StandbyFacts,
): StandbyAction[] {
  const out: StandbyAction[] = [];
  for (let t = fromMs; t <= toMs; t += TICK_MS) out.push(...m.tick(t, heardMs, facts));
  return out;
}

const reading = (record: EtcdReading["record"], leader?: string): EtcdReading => ({
  leader: leader === undefined ? undefined : { nodeId: leader, epoch: 4 },
  record,
});

const peer = (p: Partial<PeerView>): PeerView => ({
  nodeId: "a",
  role: "standby",
  epoch: 3,
  replica: false,
  appliedSeq: 0,
  ...p,
});

describe("StandbyMachine, peer mode", () => {
  it("waits while no primary has spoken, and while the lease runs", () => {
    const m = peerMode();
    expect(ticks(m, 0, 2000, undefined, ELIGIBLE)).toEqual([]);
    expect(ticks(m, 2050, 2400, 2000, ELIGIBLE)).toEqual([]);
  });

  it("an eligible replica promotes once the lease is over, parking guests first, once", () => {
    const m = peerMode();
    ticks(m, 0, 100, 100, ELIGIBLE);
    const out = ticks(m, 150, 2000, 100, ELIGIBLE);
    expect(kinds(out)).toEqual(["park", "promote"]);
    expect(out[0]).toEqual({ kind: "park", ms: PARK_MS });
    expect(out[1]).toEqual({ kind: "promote", reason: "lease_expired", force: false });
    expect(m.guestArrives()).toBe("park");
  });

  it("does not promote before the standby's side of the lease (lease + margin) is over", () => {
    const m = peerMode();
    let first: number | undefined;
    for (let t = 0; t <= 1000 && first === undefined; t += 10) {
      if (promotes(m.tick(t, 0, ELIGIBLE)).length > 0) first = t;
    }
    expect(first).toBeDefined();
    expect(first!).toBeGreaterThanOrEqual(LEASE.leaseMs);
  });

  it("an ineligible replica says so once per expiry and never promotes", () => {
    const m = peerMode();
    const out = ticks(m, 0, 2000, 0, UNGRANTED);
    expect(notes(out)).toEqual(["ineligible"]);
    expect(promotes(out)).toEqual([]);
    // The primary comes back and goes silent again: said once more.
    ticks(m, 2050, 2100, 2050, UNGRANTED);
    expect(notes(ticks(m, 2150, 4000, 2050, UNGRANTED))).toEqual(["ineligible"]);
  });

  it("maintenance mode: the expiry is noted once and nothing promotes until it ends", () => {
    const m = peerMode();
    const paused = { ...ELIGIBLE, maintenancePaused: true };
    const out = ticks(m, 0, 2000, 0, paused);
    expect(notes(out)).toEqual(["paused"]);
    expect(promotes(out)).toEqual([]);
    expect(promotes(ticks(m, 2050, 2100, 0, ELIGIBLE))).toHaveLength(1);
  });

  it("a gap of more than half a lease since the last look is this process waking, not an expiry", () => {
    const m = peerMode();
    ticks(m, 0, 100, 100, ELIGIBLE);
    const woke = m.tick(100 + LEASE.leaseMs * 2, 100, ELIGIBLE);
    expect(notes(woke)).toEqual(["woke"]);
    expect(m.heardMs).toBe(100 + LEASE.leaseMs * 2);
    // The lease is judged from the wake-up: nothing yet.
    expect(m.tick(100 + LEASE.leaseMs * 2 + TICK_MS, m.heardMs, ELIGIBLE)).toEqual([]);
  });

  it("a handover promotes at once as a switchover (a repeated one parks, promotes no more)", () => {
    const m = peerMode();
    expect(m.handover()).toEqual([
      { kind: "park", ms: PARK_MS },
      { kind: "promote", reason: "switchover", force: false },
    ]);
    expect(m.handover()).toEqual([{ kind: "park", ms: PARK_MS }]);
    // Already promoting: the lease watch adds nothing.
    expect(promotes(ticks(m, 0, 2000, 0, ELIGIBLE))).toEqual([]);
  });

  it("guests are refused unless a promotion parks them; the park ends when its timer fires", () => {
    const m = peerMode();
    expect(m.guestArrives()).toBe("refuse");
    m.handover();
    expect(m.guestArrives()).toBe("park");
    m.parkExpired();
    expect(m.guestArrives()).toBe("refuse");
  });

  it("stopping: parked guests are refused unless the standby was promoted", () => {
    const promoted = peerMode();
    promoted.handover();
    expect(promoted.stop("promoted")).toBe(false);
    expect(promoted.guestArrives()).toBe("refuse");
    expect(peerMode().stop("role decided")).toBe(true);
  });
});

describe("StandbyMachine, etcd mode", () => {
  it("reads the key at the poll interval, never twice at once, whatever the lease watch says", () => {
    const m = etcdMode();
    expect(kinds(m.tick(0, undefined, ELIGIBLE))).toEqual(["etcdRead"]);
    expect(ticks(m, TICK_MS, POLL_MS * 3, undefined, ELIGIBLE)).toEqual([]); // still reading
    expect(m.etcdRead(reading(undefined, "a"), ELIGIBLE)).toEqual([]);
    expect(m.etcdStatus).toEqual({ leader: "a", decision: "the leader key is held" });
    expect(kinds(m.tick(POLL_MS * 3 + TICK_MS, undefined, ELIGIBLE))).toEqual(["etcdRead"]);
    expect(m.tick(POLL_MS * 3 + 2 * TICK_MS, undefined, ELIGIBLE)).toEqual([]);
  });

  it("the granted replica the record names takes the key and promotes at the record's epoch", () => {
    const m = etcdMode();
    m.tick(0, undefined, ELIGIBLE);
    const decided = m.etcdRead(reading({ epoch: 5, primary: "a", replica: "b" }), ELIGIBLE);
    expect(notes(decided)).toEqual(["etcdDecision"]);
    expect(decided.at(-1)).toEqual({ kind: "etcdAcquire", epoch: 6 });
    const out = m.etcdAcquired(true, ELIGIBLE, 0);
    expect(notes(out)).toEqual(["etcdKeyAcquired"]);
    expect(promotes(out)).toEqual([
      { kind: "promote", reason: "etcd_key_acquired", force: false, epoch: 6 },
    ]);
    expect(kinds(out).indexOf("park")).toBeLessThan(kinds(out).indexOf("promote"));
  });

  it("probes the peer when the record alone does not decide, and waits for a peer's replica", () => {
    const m = etcdMode();
    m.tick(0, undefined, EMPTY);
    const record = { epoch: 2, primary: "a", replica: "" };
    expect(kinds(m.etcdRead(reading(record), EMPTY))).toEqual(["probePeer"]);
    // The peer restarted as a standby holding an ungranted replica: it has the state.
    const out = m.peerProbed(peer({ appliedSeq: 7 }), EMPTY);
    expect(kinds(out)).toEqual(["note"]);
    expect(m.etcdStatus?.decision).toMatch(/waiting for a/);
  });

  it("the configured primary starts afresh only when the peer answered and holds nothing", () => {
    const m = etcdMode(true);
    m.tick(0, undefined, EMPTY);
    m.etcdRead(reading({ epoch: 2, primary: "b", replica: "" }), EMPTY);
    const out = m.peerProbed(peer({}), EMPTY);
    expect(out.at(-1)).toEqual({ kind: "etcdAcquire", epoch: 3 + 1 });
    const silent = etcdMode(true);
    silent.tick(0, undefined, EMPTY);
    silent.etcdRead(reading({ epoch: 2, primary: "b", replica: "" }), EMPTY);
    expect(kinds(silent.peerProbed(undefined, EMPTY))).not.toContain("etcdAcquire");
  });

  it("an ungranted replica that takes the key promotes forced (its replica lacks the grant)", () => {
    const m = etcdMode();
    m.tick(0, undefined, UNGRANTED);
    m.etcdRead(reading({ epoch: 2, primary: "a", replica: "" }), UNGRANTED);
    const decided = m.peerProbed(peer({}), UNGRANTED);
    expect(decided.at(-1)?.kind).toBe("etcdAcquire");
    expect(promotes(m.etcdAcquired(true, UNGRANTED, 0))[0]?.force).toBe(true);
  });

  it("the decision is noted only when it changes", () => {
    const m = etcdMode();
    const record = { epoch: 2, primary: "a", replica: "" };
    let t = 0;
    const look = () => {
      m.tick(t, undefined, EMPTY);
      t += POLL_MS;
      m.etcdRead(reading(record), EMPTY);
      return notes(m.peerProbed(undefined, EMPTY));
    };
    expect(look()).toEqual(["etcdDecision"]);
    expect(look()).toEqual([]);
  });

  it("etcd away: the look ends, status says why, the next poll reads again", () => {
    const m = etcdMode();
    m.tick(0, undefined, ELIGIBLE);
    expect(m.etcdRead(new Error("deadline exceeded"), ELIGIBLE)).toEqual([]);
    expect(m.etcdStatus).toEqual({
      leader: null,
      decision: "etcd unreachable",
      error: "deadline exceeded",
    });
    expect(kinds(m.tick(POLL_MS, undefined, ELIGIBLE))).toEqual(["etcdRead"]);
    m.etcdRead(reading({ epoch: 1, primary: "a", replica: "b" }), ELIGIBLE);
    expect(m.etcdAcquired(new Error("lost"), ELIGIBLE, 0)).toEqual([]);
    expect(kinds(m.tick(2 * POLL_MS, undefined, ELIGIBLE))).toEqual(["etcdRead"]);
  });

  it("a key someone else took first: no promotion, the next poll looks again", () => {
    const m = etcdMode();
    m.tick(0, undefined, ELIGIBLE);
    m.etcdRead(reading({ epoch: 1, primary: "a", replica: "b" }), ELIGIBLE);
    expect(m.etcdAcquired(false, ELIGIBLE, 0)).toEqual([]);
    expect(kinds(m.tick(POLL_MS, undefined, ELIGIBLE))).toEqual(["etcdRead"]);
  });

  it("late answers (to no request under way) are ignored", () => {
    const m = etcdMode();
    expect(m.etcdRead(reading(undefined), ELIGIBLE)).toEqual([]);
    expect(m.peerProbed(peer({}), ELIGIBLE)).toEqual([]);
    expect(m.etcdAcquired(true, ELIGIBLE, 0)).toEqual([]);
    m.tick(0, undefined, ELIGIBLE);
    m.etcdRead(reading(undefined, "a"), ELIGIBLE);
    expect(m.etcdRead(reading({ epoch: 1, primary: "a", replica: "b" }), ELIGIBLE)).toEqual([]);
  });

  it("a stopped standby reads nothing more and takes no key it decided on", () => {
    const m = etcdMode();
    m.tick(0, undefined, ELIGIBLE);
    m.stop("reinit");
    const out = m.etcdRead(reading({ epoch: 1, primary: "a", replica: "b" }), ELIGIBLE);
    expect(kinds(out)).not.toContain("etcdAcquire");
    expect(ticks(m, POLL_MS, POLL_MS * 4, undefined, ELIGIBLE)).toEqual([]);
  });

  it("maintenance mode: no key is taken, except one handed over (a switchover)", () => {
    const paused = { ...ELIGIBLE, maintenancePaused: true };
    const m = etcdMode();
    m.tick(0, undefined, paused);
    const out = m.etcdRead(reading({ epoch: 1, primary: "a", replica: "b" }), paused);
    expect(kinds(out)).not.toContain("etcdAcquire");
    expect(m.etcdStatus?.decision).toBe("maintenance mode: not taking the key");
    const h = etcdMode();
    expect(kinds(h.handover())).toEqual(["park"]); // no promote until the key is ours
    h.tick(0, undefined, paused);
    const taken = h.etcdRead(reading({ epoch: 1, primary: "a", replica: "b" }), paused);
    expect(taken.at(-1)?.kind).toBe("etcdAcquire");
    expect(promotes(h.etcdAcquired(true, paused, 0))[0]?.reason).toBe("switchover");
  });

  it("after a handover the freed key is looked for every HANDOVER_POLL_MS", () => {
    const m = etcdMode();
    m.handover();
    m.tick(0, undefined, ELIGIBLE);
    m.etcdRead(reading(undefined, "a"), ELIGIBLE);
    expect(m.tick(HANDOVER_POLL_MS - 1, undefined, ELIGIBLE)).toEqual([]);
    expect(kinds(m.tick(HANDOVER_POLL_MS, undefined, ELIGIBLE))).toEqual(["etcdRead"]);
  });
});

/** One input to the machine, as fast-check draws them. */
type Input =
  | { readonly kind: "tick"; readonly advanceMs: number; readonly heard: boolean }
  | { readonly kind: "handover" }
  | { readonly kind: "read"; readonly leader: boolean; readonly replica: string }
  | { readonly kind: "probe"; readonly answer: boolean; readonly appliedSeq: number }
  | { readonly kind: "acquired"; readonly ok: boolean }
  | { readonly kind: "parkExpired" };

const input: fc.Arbitrary<Input> = fc.oneof(
  fc.record({
    kind: fc.constant("tick" as const),
    advanceMs: fc.integer({ min: 0, max: 400 }),
    heard: fc.boolean(),
  }),
  fc.constant({ kind: "handover" as const }),
  fc.record({
    kind: fc.constant("read" as const),
    leader: fc.boolean(),
    replica: fc.constantFrom("", "a", "b"),
  }),
  fc.record({
    kind: fc.constant("probe" as const),
    answer: fc.boolean(),
    appliedSeq: fc.integer({ min: 0, max: 3 }),
  }),
  fc.record({ kind: fc.constant("acquired" as const), ok: fc.boolean() }),
  fc.constant({ kind: "parkExpired" as const }),
);

const facts: fc.Arbitrary<StandbyFacts> = fc.record({
  eligible: fc.boolean(),
  holdsReplica: fc.boolean(),
  maintenancePaused: fc.boolean(),
  epoch: fc.integer({ min: 0, max: 5 }),
  backlog: fc.constant(0),
});

function feed(m: StandbyMachine, inputs: readonly Input[], f: StandbyFacts): StandbyAction[] {
  const out: StandbyAction[] = [];
  let now = 0;
  let heard: number | undefined;
  for (const i of inputs) {
    if (i.kind === "tick") {
      now += i.advanceMs;
      if (i.heard) heard = now;
      out.push(...m.tick(now, heard, f));
    } else if (i.kind === "handover") out.push(...m.handover());
    else if (i.kind === "read") {
      const record = { epoch: 2, primary: "a", replica: i.replica };
      out.push(...m.etcdRead(reading(record, i.leader ? "a" : undefined), f));
    } else if (i.kind === "probe") {
      out.push(...m.peerProbed(i.answer ? peer({ appliedSeq: i.appliedSeq }) : undefined, f));
    } else if (i.kind === "acquired") out.push(...m.etcdAcquired(i.ok, f, 0));
    else m.parkExpired();
  }
  return out;
}

describe("StandbyMachine properties", () => {
  it("at most one promote, each after a park; requests never overlap", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.array(input, { maxLength: 60 }), facts, (etcd, inputs, f) => {
        const m = etcd ? etcdMode() : peerMode();
        const out = feed(m, inputs, f);
        const p = out.findIndex((a) => a.kind === "promote");
        expect(promotes(out).length).toBeLessThanOrEqual(1);
        if (p >= 0) expect(out.slice(0, p).some((a) => a.kind === "park")).toBe(true);
        const requests = out.filter((a) => a.kind === "etcdRead" || a.kind === "etcdAcquire");
        if (!etcd) expect(requests).toEqual([]);
        // Each read is answered (or dropped as late) before the next: never two reads in a row
        // without the machine having left "reading" — checked as: acquires ≤ reads.
        const reads = requests.filter((a) => a.kind === "etcdRead").length;
        expect(requests.length - reads).toBeLessThanOrEqual(reads);
      }),
    );
  });

  it("peer mode with maintenance on or an ineligible replica never promotes on the lease", () => {
    fc.assert(
      fc.property(fc.array(input, { maxLength: 60 }), facts, (inputs, f) => {
        const noHandover = inputs.filter((i) => i.kind !== "handover");
        const out = feed(peerMode(), noHandover, f);
        if (f.maintenancePaused || !f.eligible) expect(promotes(out)).toEqual([]);
      }),
    );
  });
});

describe("a takeover waits for the received backlog", () => {
  it("holds the promotion until the device applied everything received, and says how long", () => {
    const m = peerMode();
    const backlog = { ...ELIGIBLE, backlog: 7 };
    const out = ticks(m, 0, 1000, 0, backlog);
    expect(promotes(out)).toEqual([]);
    expect(kinds(out)).toContain("awaitDevice");
    expect(notes(out)).toContain("awaitingBacklog");
    expect(m.guestArrives()).toBe("park");
    // More arrived meanwhile: wait again.
    expect(kinds(m.backlogApplied(1100, { ...ELIGIBLE, backlog: 2 }))).toEqual(["awaitDevice"]);
    const done = m.backlogApplied(1250, ELIGIBLE);
    expect(promotes(done)).toHaveLength(1);
    const waited = done.find((a) => a.kind === "note" && a.note.kind === "backlogApplied");
    const first = out.findIndex((a) => a.kind === "awaitDevice");
    expect(first).toBeGreaterThanOrEqual(0);
    expect(waited).toMatchObject({ note: { kind: "backlogApplied" } });
    expect(m.lastBacklogWaitMs).toBeGreaterThan(0);
    // Answered once: a late second answer promotes nothing.
    expect(m.backlogApplied(1300, ELIGIBLE)).toEqual([]);
  });

  it("promotes at once with no backlog (wait 0)", () => {
    const m = peerMode();
    expect(promotes(ticks(m, 0, 1000, 0, ELIGIBLE))).toHaveLength(1);
    expect(m.lastBacklogWaitMs).toBe(0);
  });

  it("etcd mode: a key taken with a backlog waits for it too", () => {
    const m = etcdMode();
    m.tick(0, undefined, ELIGIBLE);
    m.etcdRead(reading({ epoch: 5, primary: "a", replica: "b" }), ELIGIBLE);
    const out = m.etcdAcquired(true, { ...ELIGIBLE, backlog: 3 }, 10);
    expect(promotes(out)).toEqual([]);
    expect(kinds(out)).toContain("awaitDevice");
    expect(promotes(m.backlogApplied(40, ELIGIBLE))[0]?.reason).toBe("etcd_key_acquired");
    expect(m.lastBacklogWaitMs).toBe(30);
  });

  it("peer mode: the old primary speaking meanwhile calls it off; a later expiry decides anew", () => {
    const m = peerMode();
    ticks(m, 0, 1000, 0, { ...ELIGIBLE, backlog: 7 });
    expect(m.holdingTakeover).toBe(true);
    expect(notes(m.primaryHeard())).toEqual(["takeoverCalledOff"]);
    expect(m.holdingTakeover).toBe(false);
    expect(m.backlogApplied(1100, ELIGIBLE)).toEqual([]); // the device's answer comes too late
    expect(m.primaryHeard()).toEqual([]); // nothing held: nothing to call off
    // Heard at 1100, silent again: the next expiry takes over (the backlog applied by then).
    expect(promotes(ticks(m, 1100, 2000, 1100, ELIGIBLE))).toHaveLength(1);
  });

  it("the old primary speaking does not call off a key taken (etcd) or a handover", () => {
    const etcd = etcdMode();
    etcd.tick(0, undefined, ELIGIBLE);
    etcd.etcdRead(reading({ epoch: 5, primary: "a", replica: "b" }), ELIGIBLE);
    etcd.etcdAcquired(true, { ...ELIGIBLE, backlog: 3 }, 10);
    expect(etcd.primaryHeard()).toEqual([]);
    expect(etcd.holdingTakeover).toBe(true);
    const peer = peerMode();
    const handover = peer.handover();
    expect(promotes(handover)[0]?.reason).toBe("switchover"); // a handover is not held here
    expect(peer.primaryHeard()).toEqual([]);
  });
});

describe("a replica's device that fails", () => {
  const FAILURE = { reason: "device thread exited (code 1)", seq: 4 };

  it("gives up a takeover waiting for its backlog, tells the node once, and decides nothing more", () => {
    const m = peerMode();
    ticks(m, 0, 1000, 0, { ...ELIGIBLE, backlog: 7 });
    expect(m.holdingTakeover).toBe(true);
    const out = m.deviceFailed(FAILURE, 7);
    expect(kinds(out)).toEqual(["note", "deviceFailed"]);
    expect(out[0]).toMatchObject({
      note: { kind: "deviceFailed", backlog: 7, takeoverDropped: true },
    });
    expect(out[1]).toEqual({ kind: "deviceFailed", failure: FAILURE });
    expect(m.holdingTakeover).toBe(false);
    expect(m.replicaDeviceFailed).toBe(true);
    expect(m.deviceFailed(FAILURE, 7)).toEqual([]); // once
    expect(m.backlogApplied(1100, ELIGIBLE)).toEqual([]); // an answer after it changes nothing
    expect(ticks(m, 1100, 3000, 0, ELIGIBLE)).toEqual([]);
    expect(m.handover()).toEqual([]);
  });

  it("an idle one: no expiry promotes the replica afterwards (peer), nor a key (etcd)", () => {
    const peer = peerMode();
    expect(notes(peer.deviceFailed(FAILURE, 0))).toEqual(["deviceFailed"]);
    expect(ticks(peer, 0, 2000, 0, ELIGIBLE)).toEqual([]);
    const etcd = etcdMode();
    etcd.deviceFailed(FAILURE, 0);
    expect(ticks(etcd, 0, 2000, undefined, ELIGIBLE)).toEqual([]); // not even a read
  });

  it("etcd: a key taken while the device failed is not used (the node is stepping down)", () => {
    const m = etcdMode();
    m.tick(0, undefined, ELIGIBLE);
    m.etcdRead(reading({ epoch: 5, primary: "a", replica: "b" }), ELIGIBLE);
    m.deviceFailed(FAILURE, 3);
    expect(promotes(m.etcdAcquired(true, ELIGIBLE, 10))).toEqual([]);
  });

  it("a stopped standby is told nothing more", () => {
    const m = peerMode();
    m.stop("node shutting down");
    expect(m.deviceFailed(FAILURE, 0)).toEqual([]);
  });
});
