// The supervisor's decisions, as pure functions: which role a starting node takes, who wins
// when two primaries meet, when a standby takes over and at which epoch, and what a primary
// that steps down throws away. The daemon (node.ts and its roles) calls them around its disk,
// network and timers; the failover simulator (test/sim) calls the same functions.
import { type LeaseTerms, standbyLeaseExpired } from "./lease.js";
import type { PrimaryLeaseState } from "./release.js";

export type PairRole = "primary" | "standby";

/** What a starting node learned from its peer's Probe; undefined when the peer did not answer. */
export interface PeerProbe {
  readonly role: PairRole;
  readonly epoch: number;
  /** The peer is a standby holding a replica it may take over with (eligible). */
  readonly replica: boolean;
  /** The last seq the peer's state holds (0: it holds nothing). */
  readonly appliedSeq: number;
}

export interface InitialRole {
  readonly role: PairRole;
  /**
   * The node's epoch from now on; persist it (write and fsync) before acting when it differs
   * from the one read at start.
   */
  readonly epoch: number;
}

/**
 * A starting node's role. A starting node holds no state (GPU state is volatile). A peer that
 * is primary, or a standby holding a replica (it takes over when the lease it watches
 * expires), makes this node a standby. Else the node configured `role: primary` starts the
 * pair as primary at an epoch above both nodes' — but only when that throws nothing away: the
 * peer answered and holds nothing, or the pair never served (epoch 0 here: cold start of both
 * gives epoch 1). A node that has served (epoch > 0) and cannot reach its peer waits as a
 * standby (see standbyWithoutPrimary): the peer may be serving (paused, cut off), and an
 * empty primary of a higher or equal epoch would make it discard everything when they meet.
 * The other node is a standby.
 */
export function initialRole(
  configured: PairRole,
  ownEpoch: number,
  peer: PeerProbe | undefined,
): InitialRole {
  const known = Math.max(ownEpoch, peer?.epoch ?? 0);
  const standby = { role: "standby", epoch: known } as const;
  if (peer?.role === "primary" || (peer?.role === "standby" && peer.replica)) return standby;
  if (configured !== "primary") return standby;
  const peerEmpty = peer !== undefined && peer.appliedSeq === 0;
  if (peerEmpty || (peer === undefined && ownEpoch === 0)) {
    return { role: "primary", epoch: known + 1 };
  }
  return standby;
}

export interface StandbySelf {
  readonly configured: PairRole;
  readonly epoch: number;
  /**
   * This standby holds a replica (applied up to a seq above 0), granted or not — during a
   * snapshot, the one the snapshot is replacing.
   */
  readonly holdsReplica: boolean;
}

export type StandbyRecovery =
  | { readonly action: "wait" }
  /** Start the pair as primary with an empty state (neither node holds anything). */
  | { readonly action: "start"; readonly epoch: number }
  /** Take over with this standby's replica although it lacks the grant: it is all that is left. */
  | { readonly action: "takeOver"; readonly epoch: number };

/**
 * A standby with no primary in sight (none has spoken to it, or the one it followed went
 * silent and it may not take over) asks its peer, so the pair does not stay without a primary
 * when one of them can serve. A peer that is primary, or an eligible replica (it takes over
 * itself), or that does not answer (it may be serving, paused or cut off): wait. A peer that is
 * a standby holding nothing (it lost its state): this standby takes over with its replica
 * (ungranted: the frames it may lack are gone with the peer's state anyway), or, holding
 * nothing either, the configured primary starts the pair afresh. A peer holding state it
 * cannot take over with: wait for it to find this node empty and take over itself.
 */
export function standbyWithoutPrimary(
  self: StandbySelf,
  peer: PeerProbe | undefined,
): StandbyRecovery {
  if (peer === undefined || peer.role === "primary" || peer.replica || peer.appliedSeq > 0) {
    return { action: "wait" };
  }
  const epoch = Math.max(self.epoch, peer.epoch) + 1;
  if (self.holdsReplica) return { action: "takeOver", epoch };
  if (self.configured === "primary") return { action: "start", epoch };
  return { action: "wait" };
}

/** A primary as another primary sees it in its hello. */
export interface PrimaryClaim {
  readonly epoch: number;
  readonly nodeId: string;
}

/**
 * Two primaries meet (peer mode, after a partition or a restart): whether `other` wins over
 * `self`. The higher epoch wins; a tie (both took the same epoch apart) goes to the lower node
 * id, so exactly one of the two steps down whichever dials the other.
 */
export function otherPrimaryWins(self: PrimaryClaim, other: PrimaryClaim): boolean {
  return other.epoch > self.epoch || (other.epoch === self.epoch && other.nodeId < self.nodeId);
}

/** The epoch a standby takes over at: above its own and any epoch it has seen. */
export function promotionEpoch(ownEpoch: number, seenEpoch: number): number {
  return Math.max(ownEpoch, seenEpoch) + 1;
}

/** The epoch a primary persists as it steps down before `theirEpoch`. */
export function stepDownEpoch(ownEpoch: number, theirEpoch: number): number {
  return Math.max(ownEpoch, theirEpoch);
}

/** What the standby's lease watch remembers between two looks. */
export interface StandbyWatch {
  /** Own monotonic time of the previous look (undefined before the first). */
  readonly lastWatchMs: number | undefined;
  /** Own monotonic time of the newest message from the primary (undefined: none yet). */
  readonly lastMessageMs: number | undefined;
}

export type StandbyVerdict =
  /** This process itself was stopped (paused, starved) since the last look: see below. */
  | "woke"
  /** No primary has spoken to this node yet: nothing to take over from. */
  | "no-primary"
  /** The primary's lease may still run. */
  | "live"
  /** The lease expired but this node may not take over (not an eligible replica). */
  | "ineligible"
  /** The lease expired and this node is an eligible replica: take over. */
  | "promote";

/**
 * One look of the standby's lease watch (every heartbeat/2 or so). A gap of more than half a
 * lease since the previous look means this process was stopped: what the primary sent
 * meanwhile is still unread in its socket, so the lease is judged from the wake-up only.
 */
export function watchStandbyLease(
  prev: StandbyWatch,
  nowMs: number,
  t: LeaseTerms,
  eligible: boolean,
): { readonly watch: StandbyWatch; readonly verdict: StandbyVerdict } {
  const sinceWatch = prev.lastWatchMs === undefined ? 0 : nowMs - prev.lastWatchMs;
  const last = prev.lastMessageMs;
  if (sinceWatch > t.leaseMs / 2 && last !== undefined) {
    return { watch: { lastWatchMs: nowMs, lastMessageMs: Math.max(last, nowMs) }, verdict: "woke" };
  }
  const watch = { lastWatchMs: nowMs, lastMessageMs: last };
  if (last === undefined) return { watch, verdict: "no-primary" };
  if (!standbyLeaseExpired(nowMs, last, t)) return { watch, verdict: "live" };
  return { watch, verdict: eligible ? "promote" : "ineligible" };
}

/** A primary's guest counters: frames applied, replies released, sessions opened. */
export interface WorkCounters {
  readonly lastSeq: number;
  readonly frames: number;
  readonly acknowledged: number;
  readonly sessions: number;
}

/** Where a primary's solo work began: the counters when it lost its lease. */
export interface SoloMark {
  /** The last seq a standby of this epoch confirmed applied: entries after it may be lost. */
  readonly fromSeq: number;
  readonly frames: number;
  readonly acknowledged: number;
  readonly sessions: number;
}

export interface DiscardedWork {
  readonly entries: number;
  readonly frames: number;
  /** Replies released since the mark: whose guests were told of work now thrown away. */
  readonly acknowledgedFrames: number;
  readonly sessions: number;
}

export const NOTHING_DISCARDED: DiscardedWork = Object.freeze({
  entries: 0,
  frames: 0,
  acknowledgedFrames: 0,
  sessions: 0,
});

/**
 * The solo mark after a lease step: none while the lease is held (the standby has or will get
 * everything), set when it is first lost, kept while it stays lost.
 */
export function stepSoloMark(
  lease: PrimaryLeaseState,
  mark: SoloMark | undefined,
  confirmedSeq: number,
  now: WorkCounters,
): SoloMark | undefined {
  if (lease === "leased") return undefined;
  return mark ?? soloMarkAt(confirmedSeq, now);
}

export function soloMarkAt(confirmedSeq: number, now: WorkCounters): SoloMark {
  return {
    fromSeq: confirmedSeq,
    frames: now.frames,
    acknowledged: now.acknowledged,
    sessions: now.sessions,
  };
}

/** What stepping down now would throw away: everything since the solo mark. */
export function soloWork(mark: SoloMark | undefined, now: WorkCounters): DiscardedWork {
  if (mark === undefined) return NOTHING_DISCARDED;
  return {
    entries: now.lastSeq - mark.fromSeq,
    frames: now.frames - mark.frames,
    acknowledgedFrames: now.acknowledged - mark.acknowledged,
    sessions: now.sessions - mark.sessions,
  };
}

/**
 * What a primary stepping down discards: nothing after a completed handover (it keeps its
 * state, equal to the new primary's, and stays its replica), else its solo work (it restarts
 * as an empty standby and resyncs by snapshot).
 */
export function discardedOnStepDown(handedOver: boolean, solo: DiscardedWork): DiscardedWork {
  return handedOver ? NOTHING_DISCARDED : solo;
}

/** What a primary held when it stepped down and threw its state away. */
export interface HeldState {
  readonly sessions: number;
  readonly contexts: number;
  readonly vramBytes: number;
}

/**
 * The whole state a step-down throws away — not only the solo work since the lease was lost
 * (soloWork): every session, context and byte of VRAM it held, and the log entries its peer
 * never confirmed (those past the point the new primary may have). Nothing after a handover.
 */
export interface StateDiscarded extends HeldState {
  readonly entries: number;
}

export function stateDiscardedOnStepDown(
  handedOver: boolean,
  held: HeldState,
  lastSeq: number,
  confirmedSeq: number,
): StateDiscarded {
  if (handedOver) return { sessions: 0, contexts: 0, vramBytes: 0, entries: 0 };
  return { ...held, entries: Math.max(0, lastSeq - confirmedSeq) };
}
