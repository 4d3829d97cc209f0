// The node's (the supervisor's) decisions as a pure machine: which role a starting node takes
// (initialRole, or the etcd acquisition rule), the look for a primary when none is in sight
// (standbyWithoutPrimary), promotion, step-down and adopting a higher epoch. Inputs in, actions
// out; the node driver (node-driver.ts) makes the requests and the role changes. Requests are
// answered by inputs; an answer to no request under way (a late one) is ignored.
//
// Persist before you act: every action list that changes the epoch starts with `persist`, and
// the driver writes (and fsyncs) it before it carries out anything after it — the role that
// serves, or any message, carries only an epoch already on disk.
import { holdingOf, mayAcquire } from "./etcd-lease.js";
import {
  type DiscardedWork,
  discardedOnStepDown,
  initialRole,
  type PairRole,
  promotionEpoch,
  standbyWithoutPrimary,
  stepDownEpoch,
} from "./failover.js";
import type { PeerView } from "./ports.js";

export type NodeMode = "standalone" | "peer" | "etcd";
export type NodeRoleName = "starting" | "standalone" | "primary" | "standby";

/** What the node's state will be in its next role. */
export type RoleState =
  /** A new, empty role. */
  | "fresh"
  /** The standby's replica, handed to the new primary. */
  | "takeover"
  /** The old primary's state, equal to the new primary's after a handover: kept as a replica. */
  | "kept";

export type NodeNote =
  | { readonly kind: "coldStart" }
  | { readonly kind: "rejoin" }
  | { readonly kind: "watchProbe" }
  | { readonly kind: "recoveryTakeover"; readonly peer: PeerView }
  | { readonly kind: "recoveryStart"; readonly peer: PeerView }
  /** The peer holds nothing, but the device has yet to apply what it received: not yet. */
  | { readonly kind: "recoveryAwaitingBacklog"; readonly entries: number }
  /** No primary in sight and the peer holds nothing, but maintenance mode forbids taking over. */
  | { readonly kind: "maintenanceHold"; readonly peer: PeerView }
  | { readonly kind: "etcdStart"; readonly reason: string }
  | { readonly kind: "etcdUnreachable"; readonly error: string }
  | { readonly kind: "promoting"; readonly reason: string; readonly epoch: number };

/** A primary stepping down: what it discards, and whether it keeps its state (a handover). */
export interface StepDown {
  readonly discarded: DiscardedWork;
  readonly kept: boolean;
  /** The epoch it stepped down before, and why (for the log). */
  readonly theirEpoch: number;
  readonly reason: string;
}

export type NodeAction =
  /** Write and fsync the epoch; everything after it acts on it. */
  | { readonly kind: "persist"; readonly epoch: number }
  | { readonly kind: "probePeer" }
  | { readonly kind: "etcdRead" }
  | { readonly kind: "etcdAcquire"; readonly epoch: number }
  /**
   * Stop the current role (`stopReason`); a primary stepping down then gives the etcd key up
   * (a standby holds none) and is told it stepped down once the new role started. Then start
   * the new role from `state`.
   */
  | {
      readonly kind: "become";
      readonly role: "standalone" | "primary" | "standby";
      readonly reason: string;
      readonly stopReason: string;
      readonly state: RoleState;
      readonly stepDown: StepDown | undefined;
    }
  /** Promote this node (Supervisor.promote: after the current callback), forced or not. */
  | { readonly kind: "promote"; readonly reason: string; readonly force: boolean }
  /** Peer mode: look for a primary every `ms` from now on (watch()). */
  | { readonly kind: "watchEvery"; readonly ms: number }
  | { readonly kind: "note"; readonly note: NodeNote };

export interface NodeMachineOptions {
  readonly mode: NodeMode;
  readonly configured: PairRole;
  readonly nodeId: string;
  readonly leaseMs: number;
}

/** What the node's standby role says when asked. */
export interface StandbyView {
  readonly primaryInSight: boolean;
  readonly holdsReplica: boolean;
  /** The highest epoch its receiver has seen. */
  readonly seenEpoch: number;
  /** It holds a replica it may take over with (forced or not, as asked). */
  readonly canTakeOver: boolean;
  /**
   * It has decided to take over and waits for its device to apply the received backlog: no
   * recovery is decided meanwhile (it would promote before that backlog is applied).
   */
  readonly takingOver?: boolean;
  /**
   * Entries it received that its device has not applied yet (absent: none). A recovery
   * takeover waits for them, as the lease's takeover does (issue #14): the next watch retries.
   */
  readonly backlog?: number;
}

type Pending =
  | { readonly what: "none" }
  | { readonly what: "bootProbe"; readonly record?: EtcdBootRecord }
  | { readonly what: "bootRead" }
  | { readonly what: "bootAcquire"; readonly epoch: number }
  | { readonly what: "watchProbe" };

type EtcdBootRecord = Parameters<typeof mayAcquire>[0]["record"];

const NONE: Pending = { what: "none" };

export class NodeMachine {
  private readonly options: NodeMachineOptions;
  epoch = 0;
  role: NodeRoleName = "starting";
  private pending: Pending = NONE;
  private stopping = false;

  constructor(options: NodeMachineOptions) {
    this.options = options;
  }

  /** The process starts with the epoch it read from disk. */
  start(epochRead: number): NodeAction[] {
    this.epoch = epochRead;
    if (this.options.mode === "standalone") {
      return [...this.persist(Math.max(1, epochRead)), this.become("standalone", "cold_start")];
    }
    if (this.options.mode === "etcd") {
      this.pending = { what: "bootRead" };
      return [{ kind: "etcdRead" }];
    }
    this.pending = { what: "bootProbe" };
    return [{ kind: "probePeer" }];
  }

  /** The answer to probePeer (undefined: the peer did not answer). */
  peerProbed(
    peer: PeerView | undefined,
    standby: StandbyView | undefined,
    maintenancePaused = false,
  ): NodeAction[] {
    const p = this.pending;
    if (p.what === "watchProbe") return this.watchProbed(peer, standby, maintenancePaused);
    if (p.what !== "bootProbe") return [];
    this.pending = NONE;
    if (this.options.mode === "etcd") return this.etcdBoot(p.record, peer);
    const decided = initialRole(this.options.configured, this.epoch, peer);
    const out = this.persist(decided.epoch);
    if (decided.role === "primary") out.push(note({ kind: "coldStart" }));
    else if (peer?.role === "primary") out.push(note({ kind: "rejoin" }));
    out.push(this.become(decided.role, decided.role === "primary" ? "cold_start" : "start"));
    out.push({ kind: "watchEvery", ms: Math.max(1000, this.options.leaseMs * 2) });
    return out;
  }

  /** etcd mode, at start: the answer to etcdRead. */
  etcdRead(
    view:
      | { readonly leader: { readonly epoch: number } | undefined; readonly record: EtcdBootRecord }
      | Error,
  ): NodeAction[] {
    if (this.pending.what !== "bootRead") return [];
    this.pending = NONE;
    if (view instanceof Error) return this.etcdUnreachable(view);
    if (view.leader) {
      return [...this.persist(Math.max(this.epoch, view.leader.epoch)), this.startStandby()];
    }
    this.pending = { what: "bootProbe", record: view.record };
    return [{ kind: "probePeer" }];
  }

  /** etcd mode, at start: the answer to etcdAcquire. */
  etcdAcquired(acquired: boolean | Error): NodeAction[] {
    const p = this.pending;
    if (p.what !== "bootAcquire") return [];
    this.pending = NONE;
    if (acquired instanceof Error) return this.etcdUnreachable(acquired);
    if (!acquired) return [this.startStandby()];
    return [
      ...this.persist(p.epoch),
      note({ kind: "coldStart" }),
      this.become("primary", "cold_start"),
    ];
  }

  /** Peer mode, every watchEvery ms: a standby with no primary in sight asks its peer. */
  watch(standby: StandbyView | undefined): NodeAction[] {
    if (this.options.mode !== "peer" || this.stopping || this.role !== "standby") return [];
    if (this.pending.what !== "none" || standby === undefined || standby.primaryInSight) return [];
    if (standby.takingOver === true) return [];
    this.pending = { what: "watchProbe" };
    return [note({ kind: "watchProbe" }), { kind: "probePeer" }];
  }

  /**
   * The standby's primary's lease ran out (or an operator asked): take over at the epoch above
   * every one seen — etcd mode: the record's, written with the key already taken.
   */
  promote(reason: string, standby: StandbyView | undefined, etcdEpoch?: number): NodeAction[] {
    if (this.stopping || this.role !== "standby" || !standby?.canTakeOver) return [];
    const epoch = etcdEpoch ?? promotionEpoch(this.epoch, standby.seenEpoch);
    return [
      ...this.persist(epoch), // persisted before serving as primary
      note({ kind: "promoting", reason, epoch }),
      this.become("primary", reason, "promoted", "takeover"),
    ];
  }

  /**
   * A primary met a higher epoch (or an operator demoted it): it becomes a standby, keeping its
   * state only after a handover (then it equals the new primary's), else discarding its solo work.
   */
  stepDown(
    theirEpoch: number,
    reason: string,
    why: string,
    primary: { readonly handedOver: boolean; readonly solo: DiscardedWork } | undefined,
  ): NodeAction[] {
    if (this.stopping || this.role !== "primary" || primary === undefined) return [];
    const discarded = discardedOnStepDown(primary.handedOver, primary.solo);
    const kept = primary.handedOver;
    return [
      ...this.persist(stepDownEpoch(this.epoch, theirEpoch)),
      this.become(
        "standby",
        kept ? "switchover" : why,
        `stepping down: ${reason}`,
        kept ? "kept" : "fresh",
        { discarded, kept, theirEpoch, reason },
      ),
    ];
  }

  /** A standby saw a higher epoch from its primary. */
  adoptEpoch(epoch: number): NodeAction[] {
    return this.persist(epoch);
  }

  /** Operator: the standby drops its replica for a fresh snapshot. */
  reinit(): NodeAction[] {
    if (this.stopping || this.role !== "standby") return [];
    return [this.become("standby", "reinit", "reinit")];
  }

  /** The node shuts down: no more role changes; answers still under way are ignored. */
  stop(): void {
    this.stopping = true;
    this.pending = NONE;
  }

  private watchProbed(
    peer: PeerView | undefined,
    standby: StandbyView | undefined,
    maintenancePaused: boolean,
  ): NodeAction[] {
    this.pending = NONE;
    if (this.stopping || this.role !== "standby" || !standby || standby.primaryInSight) return [];
    if (standby.takingOver === true) return [];
    const decided = standbyWithoutPrimary(
      {
        configured: this.options.configured,
        epoch: this.epoch,
        holdsReplica: standby.holdsReplica,
      },
      peer,
    );
    if (decided.action === "wait" || peer === undefined) return [];
    if (decided.action === "takeOver" && maintenancePaused) {
      return [note({ kind: "maintenanceHold", peer })];
    }
    const backlog = standby.backlog ?? 0;
    if (decided.action === "takeOver" && backlog > 0) {
      return [note({ kind: "recoveryAwaitingBacklog", entries: backlog })];
    }
    if (decided.action === "takeOver") {
      // The replica lacks the grant but is all that is left: forced, above both epochs.
      const out = this.persist(decided.epoch - 1);
      out.push(note({ kind: "recoveryTakeover", peer }));
      out.push({ kind: "promote", reason: "recovery", force: true });
      return out;
    }
    return [
      ...this.persist(decided.epoch),
      note({ kind: "recoveryStart", peer }),
      this.become("primary", "cold_start", "starting the pair"),
    ];
  }

  private etcdBoot(record: EtcdBootRecord, peer: PeerView | undefined): NodeAction[] {
    const decision = mayAcquire({
      me: this.options.nodeId,
      configuredPrimary: this.options.configured === "primary",
      leaderPresent: false,
      record,
      mine: "nothing",
      peer: peer && { nodeId: peer.nodeId, holds: holdingOf(peer) },
      localEpoch: this.epoch,
    });
    const said = note({ kind: "etcdStart", reason: decision.reason });
    if (!decision.acquire) return [said, this.startStandby()];
    this.pending = { what: "bootAcquire", epoch: decision.epoch };
    return [said, { kind: "etcdAcquire", epoch: decision.epoch }];
  }

  private etcdUnreachable(error: Error): NodeAction[] {
    return [note({ kind: "etcdUnreachable", error: error.message }), this.startStandby()];
  }

  private startStandby(): NodeAction {
    return this.become("standby", "start");
  }

  /** `persist` when the epoch grows; an epoch never goes back. */
  private persist(epoch: number): NodeAction[] {
    if (epoch <= this.epoch) return [];
    this.epoch = epoch;
    return [{ kind: "persist", epoch }];
  }

  private become(
    role: "standalone" | "primary" | "standby",
    reason: string,
    stopReason = "role decided",
    state: RoleState = "fresh",
    stepDown?: StepDown,
  ): NodeAction {
    this.role = role;
    return { kind: "become", role, reason, stopReason, state, stepDown };
  }
}

function note(n: NodeNote): NodeAction {
  return { kind: "note", note: n };
}
