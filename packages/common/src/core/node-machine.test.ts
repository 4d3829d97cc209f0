// Proves the node machine's decisions, driven by hand as the node driver would: a starting node
// takes its role from a probe (peer mode) or the etcd rule (read, probe, acquire), a standalone
// node persists epoch 1 on its first start; the watch probes only for a standby with no primary
// in sight, one probe at a time (none while its own takeover waits for its backlog), and starts
// the pair, takes over (forced, once its device applied its backlog) or waits; promotion and step-down persist the new epoch BEFORE
// the role change (and an epoch never goes back);
// answers to no request under way are ignored, and a stopped node changes no role.
// Properties (fast-check): in any sequence of inputs every epoch change is a persist that comes
// before the role change it belongs to, and persisted epochs only grow.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ClusterRecord } from "./etcd-lease.js";
import { NOTHING_DISCARDED } from "./failover.js";
import {
  type NodeAction,
  NodeMachine,
  type NodeMachineOptions,
  type StandbyView,
} from "./node-machine.js";
import type { PeerView } from "./ports.js";

const PEER: NodeMachineOptions = { mode: "peer", configured: "primary", nodeId: "a", leaseMs: 500 };
const ETCD: NodeMachineOptions = { ...PEER, mode: "etcd" };

const kinds = (actions: readonly NodeAction[]) => actions.map((a) => a.kind);
const become = (actions: readonly NodeAction[]) =>
  actions.find((a): a is Extract<NodeAction, { kind: "become" }> => a.kind === "become");
const persisted = (actions: readonly NodeAction[]) =>
  actions.flatMap((a) => (a.kind === "persist" ? [a.epoch] : []));
const notes = (actions: readonly NodeAction[]) =>
  actions.flatMap((a) => (a.kind === "note" ? [a.note.kind] : []));

const peer = (p: Partial<PeerView>): PeerView => ({
  nodeId: "b",
  role: "standby",
  epoch: 0,
  replica: false,
  appliedSeq: 0,
  ...p,
});

const STANDBY: StandbyView = {
  primaryInSight: false,
  holdsReplica: true,
  seenEpoch: 0,
  canTakeOver: true,
};

/** A node of `options` that started at `epoch` and became a standby. */
function standbyAt(epoch: number, options: NodeMachineOptions = PEER): NodeMachine {
  const m = new NodeMachine({ ...options, configured: "standby" });
  m.start(epoch);
  if (options.mode === "etcd") m.etcdRead({ leader: { epoch }, record: undefined });
  else m.peerProbed(peer({ role: "primary", epoch }), undefined);
  expect(m.role).toBe("standby");
  return m;
}

/** A node that started the pair as primary at epoch + 1. */
function primaryAt(epoch: number): NodeMachine {
  const m = new NodeMachine(PEER);
  m.start(epoch);
  m.peerProbed(peer({ epoch }), undefined);
  expect(m.role).toBe("primary");
  return m;
}

describe("NodeMachine at start", () => {
  it("standalone: persists epoch 1 on the first start, nothing after", () => {
    const first = new NodeMachine({ ...PEER, mode: "standalone" });
    const out = first.start(0);
    expect(kinds(out)).toEqual(["persist", "become"]);
    expect(persisted(out)).toEqual([1]);
    expect(become(out)).toMatchObject({ role: "standalone", reason: "cold_start" });
    const again = new NodeMachine({ ...PEER, mode: "standalone" }).start(4);
    expect(kinds(again)).toEqual(["become"]);
  });

  it("peer mode: probes, then the configured primary of a cold pair starts it at epoch 1", () => {
    const m = new NodeMachine(PEER);
    expect(kinds(m.start(0))).toEqual(["probePeer"]);
    expect(m.role).toBe("starting");
    const out = m.peerProbed(undefined, undefined);
    expect(kinds(out)).toEqual(["persist", "note", "become", "watchEvery"]);
    expect(persisted(out)).toEqual([1]);
    expect(become(out)).toMatchObject({ role: "primary", reason: "cold_start", state: "fresh" });
    expect(out.at(-1)).toEqual({ kind: "watchEvery", ms: 1000 });
  });

  it("peer mode: a primary peer makes this node a standby at its epoch (a rejoin)", () => {
    const m = new NodeMachine(PEER);
    m.start(2);
    const out = m.peerProbed(peer({ role: "primary", epoch: 5 }), undefined);
    expect(persisted(out)).toEqual([5]);
    expect(notes(out)).toEqual(["rejoin"]);
    expect(become(out)).toMatchObject({ role: "standby", reason: "start" });
  });

  it("peer mode: a node that has served waits as a standby for a silent peer, persisting nothing", () => {
    const m = new NodeMachine(PEER);
    m.start(3);
    const out = m.peerProbed(undefined, undefined);
    expect(persisted(out)).toEqual([]);
    expect(become(out)?.role).toBe("standby");
  });

  it("the watch interval is twice the lease, at least a second", () => {
    const m = new NodeMachine({ ...PEER, leaseMs: 900 });
    m.start(0);
    expect(m.peerProbed(undefined, undefined).at(-1)).toEqual({ kind: "watchEvery", ms: 1800 });
  });

  it("etcd mode: a held key makes a standby, adopting the leader's higher epoch", () => {
    const m = new NodeMachine(ETCD);
    expect(kinds(m.start(1))).toEqual(["etcdRead"]);
    const out = m.etcdRead({ leader: { epoch: 4 }, record: undefined });
    expect(kinds(out)).toEqual(["persist", "become"]);
    expect(persisted(out)).toEqual([4]);
    expect(become(out)?.role).toBe("standby");
  });

  it("etcd mode: a free key with no record: the configured primary takes it, persisting the epoch first", () => {
    const m = new NodeMachine(ETCD);
    m.start(0);
    expect(kinds(m.etcdRead({ leader: undefined, record: undefined }))).toEqual(["probePeer"]);
    const decided = m.peerProbed(undefined, undefined);
    expect(kinds(decided)).toEqual(["note", "etcdAcquire"]);
    expect(decided.at(-1)).toEqual({ kind: "etcdAcquire", epoch: 1 });
    const out = m.etcdAcquired(true);
    expect(kinds(out)).toEqual(["persist", "note", "become"]);
    expect(become(out)).toMatchObject({ role: "primary", reason: "cold_start" });
  });

  it("etcd mode: a peer holding an ungranted replica is waited for (standby, no acquisition)", () => {
    const m = new NodeMachine(ETCD);
    m.start(1);
    const record: ClusterRecord = { epoch: 1, primary: "a", replica: "" };
    m.etcdRead({ leader: undefined, record });
    const out = m.peerProbed(peer({ appliedSeq: 9 }), undefined);
    expect(kinds(out)).toEqual(["note", "become"]);
    expect(become(out)?.role).toBe("standby");
  });

  it("etcd mode: etcd away, or the key taken first, makes a standby", () => {
    const away = new NodeMachine(ETCD);
    away.start(0);
    const out = away.etcdRead(new Error("deadline"));
    expect(notes(out)).toEqual(["etcdUnreachable"]);
    expect(become(out)?.role).toBe("standby");
    const lost = new NodeMachine(ETCD);
    lost.start(0);
    lost.etcdRead({ leader: undefined, record: undefined });
    lost.peerProbed(undefined, undefined);
    expect(become(lost.etcdAcquired(false))?.role).toBe("standby");
  });

  it("etcd mode never watches for a primary (the leader key does)", () => {
    const m = standbyAt(1, ETCD);
    expect(m.watch(STANDBY)).toEqual([]);
  });
});

describe("NodeMachine watching for a primary (peer mode)", () => {
  it("probes only for a standby with no primary in sight, one probe at a time", () => {
    const m = standbyAt(2);
    expect(m.watch({ ...STANDBY, primaryInSight: true })).toEqual([]);
    expect(kinds(m.watch(STANDBY))).toEqual(["note", "probePeer"]);
    expect(m.watch(STANDBY)).toEqual([]); // the first is still out
    m.peerProbed(undefined, STANDBY);
    expect(kinds(m.watch(STANDBY))).toEqual(["note", "probePeer"]);
  });

  it("a peer holding nothing: this standby's replica takes over, forced, above both epochs", () => {
    const m = standbyAt(2);
    m.watch(STANDBY);
    const out = m.peerProbed(peer({ epoch: 3 }), STANDBY);
    expect(kinds(out)).toEqual(["persist", "note", "promote"]);
    expect(persisted(out)).toEqual([3]);
    expect(out.at(-1)).toEqual({ kind: "promote", reason: "recovery", force: true });
    const promoted = m.promote("recovery", { ...STANDBY, seenEpoch: 2 });
    expect(persisted(promoted)).toEqual([4]);
    expect(become(promoted)).toMatchObject({ role: "primary", state: "takeover" });
  });

  it("no recovery while the standby's own takeover waits for its device's backlog", () => {
    const m = standbyAt(2);
    expect(m.watch({ ...STANDBY, takingOver: true })).toEqual([]);
    m.watch(STANDBY); // the probe went out before the takeover was decided
    expect(m.peerProbed(peer({ epoch: 3 }), { ...STANDBY, takingOver: true })).toEqual([]);
    expect(m.role).toBe("standby");
  });

  it("a recovery takeover waits for the device's backlog, then goes on at a later watch", () => {
    const m = standbyAt(2);
    m.watch(STANDBY);
    expect(m.peerProbed(peer({ epoch: 3 }), { ...STANDBY, backlog: 3 })).toEqual([
      { kind: "note", note: { kind: "recoveryAwaitingBacklog", entries: 3 } },
    ]);
    expect(m.epoch).toBe(2); // nothing persisted
    m.watch(STANDBY);
    const out = m.peerProbed(peer({ epoch: 3 }), { ...STANDBY, backlog: 0 });
    expect(out.at(-1)).toEqual({ kind: "promote", reason: "recovery", force: true });
  });

  it("maintenance mode holds the takeover", () => {
    const m = standbyAt(2);
    m.watch(STANDBY);
    expect(notes(m.peerProbed(peer({}), STANDBY, true))).toEqual(["maintenanceHold"]);
    expect(m.role).toBe("standby");
  });

  it("neither holds anything: the configured primary starts the pair afresh", () => {
    const m = new NodeMachine(PEER);
    m.start(2);
    m.peerProbed(undefined, undefined); // has served, peer silent: standby
    m.watch({ ...STANDBY, holdsReplica: false });
    const out = m.peerProbed(peer({ epoch: 2 }), { ...STANDBY, holdsReplica: false });
    expect(kinds(out)).toEqual(["persist", "note", "become"]);
    expect(persisted(out)).toEqual([3]);
    expect(become(out)).toMatchObject({ role: "primary", stopReason: "starting the pair" });
  });

  it("waits when the peer is primary, silent, or holds state; and when a primary came in sight", () => {
    for (const p of [peer({ role: "primary" }), undefined, peer({ appliedSeq: 4 })]) {
      const m = standbyAt(1);
      m.watch(STANDBY);
      expect(m.peerProbed(p, STANDBY)).toEqual([]);
    }
    const m = standbyAt(1);
    m.watch(STANDBY);
    expect(m.peerProbed(peer({}), { ...STANDBY, primaryInSight: true })).toEqual([]);
    const changed = standbyAt(1);
    changed.watch(STANDBY);
    expect(changed.peerProbed(peer({}), undefined)).toEqual([]); // no longer that standby
  });
});

describe("NodeMachine promotion, step-down, epochs", () => {
  it("promotion persists the epoch above every one seen before the primary starts", () => {
    const m = standbyAt(3);
    const out = m.promote("lease_expired", { ...STANDBY, seenEpoch: 5 });
    expect(kinds(out)).toEqual(["persist", "note", "become"]);
    expect(persisted(out)).toEqual([6]);
    expect(become(out)).toMatchObject({
      role: "primary",
      reason: "lease_expired",
      stopReason: "promoted",
      state: "takeover",
    });
  });

  it("etcd mode promotes at the record's epoch", () => {
    const m = standbyAt(3, ETCD);
    expect(persisted(m.promote("etcd_key_acquired", STANDBY, 9))).toEqual([9]);
  });

  it("no promotion without a replica to take over with, nor of a primary or a starting node", () => {
    expect(standbyAt(1).promote("lease_expired", { ...STANDBY, canTakeOver: false })).toEqual([]);
    expect(primaryAt(0).promote("lease_expired", STANDBY)).toEqual([]);
    const starting = new NodeMachine(PEER);
    starting.start(0);
    expect(starting.promote("lease_expired", STANDBY)).toEqual([]);
  });

  it("step-down persists the higher epoch first, then becomes a fresh standby discarding its solo work", () => {
    const m = primaryAt(1);
    const solo = { entries: 3, frames: 2, acknowledgedFrames: 1, sessions: 1 };
    const out = m.stepDown(5, "a higher epoch", "higher_epoch", { handedOver: false, solo });
    expect(kinds(out)).toEqual(["persist", "become"]);
    expect(persisted(out)).toEqual([5]);
    expect(become(out)).toMatchObject({
      role: "standby",
      reason: "higher_epoch",
      stopReason: "stepping down: a higher epoch",
      state: "fresh",
      stepDown: { discarded: solo, kept: false, theirEpoch: 5, reason: "a higher epoch" },
    });
  });

  it("after a handover the old primary keeps its state and discards nothing", () => {
    const m = primaryAt(1);
    const solo = { entries: 3, frames: 2, acknowledgedFrames: 1, sessions: 1 };
    const out = m.stepDown(3, "handed over", "higher_epoch", { handedOver: true, solo });
    expect(become(out)).toMatchObject({
      reason: "switchover",
      state: "kept",
      stepDown: { discarded: NOTHING_DISCARDED, kept: true, theirEpoch: 3, reason: "handed over" },
    });
  });

  it("a step-down before an equal epoch (an operator's demote) persists nothing new", () => {
    const m = primaryAt(1);
    const out = m.stepDown(2, "demoted", "manual", { handedOver: false, solo: NOTHING_DISCARDED });
    expect(kinds(out)).toEqual(["become"]);
    expect(become(out)?.reason).toBe("manual");
  });

  it("a standby only steps down if it is a primary; epochs adopted only upwards", () => {
    const m = standbyAt(4);
    expect(
      m.stepDown(9, "x", "higher_epoch", { handedOver: false, solo: NOTHING_DISCARDED }),
    ).toEqual([]);
    expect(m.adoptEpoch(3)).toEqual([]);
    expect(m.adoptEpoch(4)).toEqual([]);
    expect(m.adoptEpoch(6)).toEqual([{ kind: "persist", epoch: 6 }]);
    expect(m.epoch).toBe(6);
  });

  it("reinit: a standby becomes a fresh standby; a primary does not", () => {
    expect(become(standbyAt(1).reinit())).toMatchObject({ role: "standby", reason: "reinit" });
    expect(primaryAt(1).reinit()).toEqual([]);
  });

  it("late answers are ignored; a stopped node changes no role", () => {
    const m = standbyAt(1);
    expect(m.etcdRead({ leader: undefined, record: undefined })).toEqual([]);
    expect(m.etcdAcquired(true)).toEqual([]);
    expect(m.peerProbed(peer({}), STANDBY)).toEqual([]);
    m.watch(STANDBY);
    m.stop();
    expect(m.peerProbed(peer({}), STANDBY)).toEqual([]);
    expect(m.promote("lease_expired", STANDBY)).toEqual([]);
    expect(m.reinit()).toEqual([]);
    expect(m.watch(STANDBY)).toEqual([]);
  });
});

type Input =
  | { readonly kind: "probed"; readonly peer: PeerView | undefined; readonly standby: boolean }
  | { readonly kind: "watch"; readonly inSight: boolean }
  | { readonly kind: "promote"; readonly seen: number; readonly etcdEpoch: number | undefined }
  | { readonly kind: "stepDown"; readonly theirs: number; readonly handedOver: boolean }
  | { readonly kind: "adopt"; readonly epoch: number }
  | { readonly kind: "read"; readonly leader: number | undefined }
  | { readonly kind: "acquired"; readonly ok: boolean };

const peerArb: fc.Arbitrary<PeerView | undefined> = fc.option(
  fc.record({
    nodeId: fc.constant("b"),
    role: fc.constantFrom("primary" as const, "standby" as const),
    epoch: fc.integer({ min: 0, max: 9 }),
    replica: fc.boolean(),
    appliedSeq: fc.integer({ min: 0, max: 2 }),
  }),
  { nil: undefined },
);

const inputArb: fc.Arbitrary<Input> = fc.oneof(
  fc.record({ kind: fc.constant("probed" as const), peer: peerArb, standby: fc.boolean() }),
  fc.record({ kind: fc.constant("watch" as const), inSight: fc.boolean() }),
  fc.record({
    kind: fc.constant("promote" as const),
    seen: fc.integer({ min: 0, max: 9 }),
    etcdEpoch: fc.option(fc.integer({ min: 1, max: 12 }), { nil: undefined }),
  }),
  fc.record({
    kind: fc.constant("stepDown" as const),
    theirs: fc.integer({ min: 0, max: 12 }),
    handedOver: fc.boolean(),
  }),
  fc.record({ kind: fc.constant("adopt" as const), epoch: fc.integer({ min: 0, max: 12 }) }),
  fc.record({
    kind: fc.constant("read" as const),
    leader: fc.option(fc.integer({ min: 0, max: 9 }), { nil: undefined }),
  }),
  fc.record({ kind: fc.constant("acquired" as const), ok: fc.boolean() }),
);

function step(m: NodeMachine, i: Input): NodeAction[] {
  switch (i.kind) {
    case "probed":
      return m.peerProbed(i.peer, i.standby ? STANDBY : undefined);
    case "watch":
      return m.watch({ ...STANDBY, primaryInSight: i.inSight });
    case "promote":
      return m.promote("lease_expired", { ...STANDBY, seenEpoch: i.seen }, i.etcdEpoch);
    case "stepDown":
      return m.stepDown(i.theirs, "x", "higher_epoch", {
        handedOver: i.handedOver,
        solo: NOTHING_DISCARDED,
      });
    case "adopt":
      return m.adoptEpoch(i.epoch);
    case "read":
      return m.etcdRead({
        leader: i.leader === undefined ? undefined : { epoch: i.leader },
        record: undefined,
      });
    case "acquired":
      return m.etcdAcquired(i.ok);
  }
}

describe("NodeMachine properties", () => {
  it("persisted epochs only grow, the machine's epoch is the last persisted, persist precedes become", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(PEER, ETCD),
        fc.integer({ min: 0, max: 5 }),
        fc.array(inputArb, { maxLength: 40 }),
        (options, epoch0, inputs) => {
          const m = new NodeMachine(options);
          let last = epoch0;
          const all = [m.start(epoch0), ...inputs.map((i) => step(m, i))];
          for (const out of all) {
            for (const e of persisted(out)) {
              expect(e).toBeGreaterThan(last);
              last = e;
            }
            const p = kinds(out).lastIndexOf("persist");
            const b = kinds(out).indexOf("become");
            if (p >= 0 && b >= 0) expect(p).toBeLessThan(b);
          }
          expect(m.epoch).toBe(last);
        },
      ),
    );
  });
});
