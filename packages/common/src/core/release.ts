// Which guest replies a primary may release (acknowledge), and when its standby may take over.
// Pure functions of what the primary knows; the primary role evaluates them on every change.
//
// A reply leaves only once the primary's own device has its result (deviceSeq) and the
// mode's rule allows: async at once; sync once the standby *received* the entry (it applies
// its whole received backlog before it may take over); sync-applied once it *applied* it.
// The grant, the back-pressure and the lag bounds follow the applied seq.
//
// The standby may take over only while it holds the primary's *sync grant*: the primary grants
// it (a flag on its heartbeats, and in etcd mode the `replica` field of the cluster record)
// once the standby has applied every entry whose reply the primary ever released, and from
// then on releases only what the standby confirmed. The grant is revoked before the primary
// releases anything its standby may lack (serving alone: `degraded`). So a standby that takes
// over holds every acknowledged frame (sync mode), however it came to be a replica — by
// snapshot, by resuming after a broken link, or by a handover.

/** The primary's right to acknowledge guests. */
export type PrimaryLeaseState =
  /** Holds the lease (peer: acknowledged heartbeats; etcd: the leader key). */
  | "leased"
  /** Lost it, or never had it: releases nothing. */
  | "fenced"
  /** Serves alone: the standby's grant is revoked (peer: after a further lease without it). */
  | "degraded";

/**
 * replication.mode: when a guest reply may leave (besides the primary's own device having
 * its result). async: at once; sync: once the standby has *received* the entry and all before
 * it (DRBD protocol B); sync-applied: once it has *applied* them (protocol C).
 */
export type ReplicationMode = "async" | "sync" | "sync-applied";

export const REPLICATION_MODES = [
  "async",
  "sync",
  "sync-applied",
] as const satisfies readonly ReplicationMode[];

/**
 * Whether the standby holds each entry's device work until the primary's device has done it
 * (replication.holdStandbyDevice; docs/failure-model.md, "A device that fails"): a frame that
 * hangs a device then never runs on both at once. Absent, it holds in `async` and `sync`
 * (replies do not wait for the standby's device there) and not in `sync-applied`, where
 * holding would put the two devices in series in every reply's path.
 */
export function holdsStandbyDevice(mode: ReplicationMode, setting?: boolean): boolean {
  return setting ?? mode !== "sync-applied";
}

/** The primary's view of its standby's link (the sender's state). */
export type StandbyLinkState = "streaming" | "snapshot" | "down";

export interface ReleaseView {
  readonly mode: ReplicationMode;
  readonly lease: PrimaryLeaseState;
  readonly link: StandbyLinkState;
  /** Whether the standby holds the sync grant (or one is being given). */
  readonly granted: boolean;
  /** The standby's applied seq on the live link. */
  readonly appliedSeq: number;
  /** The standby's received seq on the live link (≥ appliedSeq). */
  readonly receivedSeq: number;
  /**
   * The highest seq a standby of this epoch confirmed holding, on any link: received (sync)
   * or applied (sync-applied) — see confirmedBy.
   */
  readonly confirmedSeq: number;
  /**
   * The highest seq whose work this primary's device has completed (DeviceProgress.doneSeq,
   * issue #14): a reply never leaves before its result exists. Absent: all of it.
   */
  readonly deviceSeq?: number;
  /**
   * A streaming standby without the grant lags so far behind (applied) that waiting for it
   * would stall guests for longer than the lease allows — just after a snapshot, with the
   * entries queued during it still to apply. It cannot take over, so replies go out as during
   * its snapshot, until it is near enough to earn the grant. Absent: false.
   */
  readonly standbyFarBehind?: boolean;
}

/** What the standby confirms by an ack, for the mode's release rule. */
export function confirmedBy(
  mode: ReplicationMode,
  ack: { readonly receivedSeq: number; readonly appliedSeq: number },
): number {
  return mode === "sync" ? ack.receivedSeq : ack.appliedSeq;
}

/** Everything may be released. */
export const RELEASE_ALL = Number.POSITIVE_INFINITY;
/** Nothing may be released. */
export const RELEASE_NONE = -1;

/**
 * The highest seq whose replies may go out, never beyond what the primary's own device has
 * done. A fenced primary releases nothing. A granted standby may take over at any moment: only
 * what it confirmed (sync: received, sync-applied: applied). A standby without the grant
 * cannot take over, but while it streams near enough (standbyFarBehind unset) the primary
 * holds replies to let it catch up and earn the grant — which needs it to have *applied*
 * everything released, so until then replies wait for its applied seq; with no such standby
 * (async, none streaming, or one still far behind), everything.
 */
export function releasableSeq(v: ReleaseView): number {
  if (v.lease === "fenced") return RELEASE_NONE;
  return Math.min(v.deviceSeq ?? RELEASE_ALL, replicatedSeq(v));
}

/** What the mode's rule alone allows (releasableSeq without the primary's device). */
function replicatedSeq(v: ReleaseView): number {
  if (v.mode === "async") return RELEASE_ALL;
  if (v.granted) return v.link === "streaming" ? confirmedBy(v.mode, v) : v.confirmedSeq;
  return v.link === "streaming" && !v.standbyFarBehind ? v.appliedSeq : RELEASE_ALL;
}

/**
 * Whether the primary should grant its standby now: it is leased, the standby streams and has
 * applied every entry whose reply went out (`releasedSeq`). In async mode streaming suffices:
 * async accepts losing the lag window.
 */
export function grantDue(v: ReleaseView & { readonly releasedSeq: number }): boolean {
  if (v.lease !== "leased" || v.link !== "streaming") return false;
  return v.mode === "async" || v.appliedSeq >= v.releasedSeq;
}

export interface PrimaryLeaseStep {
  readonly lease: PrimaryLeaseState;
  /** When the lease was lost (the fenced period began), for the degraded rule. */
  readonly fencedSinceMs: number | undefined;
  /** When the lease was last stepped (own clock): a long gap means this process was stopped. */
  readonly steppedMs?: number | undefined;
}

/**
 * Peer mode: the primary's lease state at `nowMs`. Held while `nowMs < leaseEndMs` (see
 * `primaryLeaseEndMs`); lost, it is fenced; after a further whole lease without its peer it
 * serves alone (degraded) — by then a live peer that took over would have told it its higher
 * epoch. A degraded primary stays so until it holds the lease again. The caller steps the
 * lease at least every half lease; a longer gap means this process itself was stopped
 * (paused, starved): a peer that took over meanwhile had no chance to tell it (what it sent is
 * still unread), so the fenced period starts again from the wake-up.
 */
export function stepPeerLease(
  prev: PrimaryLeaseStep,
  nowMs: number,
  leaseEndMs: number | undefined,
  leaseMs: number,
): PrimaryLeaseStep {
  if (leaseEndMs !== undefined && nowMs < leaseEndMs) {
    return { lease: "leased", fencedSinceMs: undefined, steppedMs: nowMs };
  }
  if (prev.lease === "degraded") return { ...prev, steppedMs: nowMs };
  const woke = prev.steppedMs !== undefined && nowMs - prev.steppedMs > leaseMs / 2;
  const since = prev.lease === "leased" || woke ? nowMs : (prev.fencedSinceMs ?? nowMs);
  const lease = nowMs - since >= leaseMs ? "degraded" : "fenced";
  return { lease, fencedSinceMs: since, steppedMs: nowMs };
}

export interface GrantState {
  /** The primary grants its standby (its heartbeats say so). */
  readonly granted: boolean;
  /**
   * A revocation the standby may not have seen yet: the send time (µs, the primary's clock)
   * at which it was revoked; a heartbeat sent after it must come back echoed first.
   */
  readonly revokedAtUs: number | undefined;
}

export const NO_GRANT: GrantState = { granted: false, revokedAtUs: undefined };
export const GRANTED: GrantState = { granted: true, revokedAtUs: undefined };

/**
 * Whether replies must still be gated as if the standby held the grant: it does, or it may
 * still believe so (a revocation not yet confirmed).
 */
export function grantBinds(g: GrantState): boolean {
  return g.granted || g.revokedAtUs !== undefined;
}

/**
 * The sync grant after a step of the primary. Revoked while it serves alone (degraded: it
 * releases what the standby may lack; a live standby would have taken over or told it its
 * epoch by then) and once a snapshot has replaced the standby's state (its first chunk
 * acknowledged: no longer a replica). A snapshot's revocation binds the releases until the
 * standby echoes a heartbeat sent after it: a heartbeat of the old grant still on its way
 * could otherwise grant the state the snapshot installs, while the primary released what that
 * state lacks. Given when `grantDue`.
 */
export function stepGrant(
  prev: GrantState,
  v: ReleaseView & {
    readonly releasedSeq: number;
    readonly snapshotChunksAcked: number;
    /** Now, in µs of the primary's clock (heartbeats carry such send times). */
    readonly nowUs: number;
    /** The newest heartbeat send time the standby echoed. */
    readonly echoedUs: number;
  },
): GrantState {
  if (v.lease === "degraded") return NO_GRANT;
  if (prev.granted) {
    const replaced = v.link === "snapshot" && v.snapshotChunksAcked > 0;
    return replaced ? { granted: false, revokedAtUs: v.nowUs } : prev;
  }
  if (grantDue(v)) return GRANTED;
  if (prev.revokedAtUs !== undefined && v.echoedUs > prev.revokedAtUs) return NO_GRANT;
  return prev;
}
