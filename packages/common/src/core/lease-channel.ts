// The lease channel: heartbeats and their acknowledgements on a thread of their own (the lease
// thread, packages/daemon/src/lease), so that a busy main event loop — a flood of guest
// connections, a burst of work — does not cost the primary its lease. These are its rules, as
// pure functions of monotonic times in milliseconds (one clock for the whole process).
//
// The lease rule itself is unchanged (lease.ts): the primary counts its lease from the SEND time
// of its newest acknowledged heartbeat, the standby from the RECEIVE time of the newest message,
// whichever channel carried it. What the thread adds is a second carrier, and a watchdog: it
// renews only while the main loop has turned within `watchdogMs`, and only while the main loop
// says the replication stream is up. So a main loop stalled for less than the watchdog keeps the
// lease; a truly hung one loses it `watchdogMs` + the lease after it stopped turning.

/** What the main thread publishes for the lease thread (and the lease thread for it). */
export interface LeaseChannelView {
  /** When the main loop last turned (monotonic ms). */
  readonly mainProgressMs: number;
  /** Whether the main thread wants the lease renewed (primary: its stream to the peer is up). */
  readonly renewing: boolean;
}

/** Whether the lease thread may send a heartbeat (primary) or answer one (standby) now. */
export function mayRenew(nowMs: number, view: LeaseChannelView, watchdogMs: number): boolean {
  return view.renewing && nowMs - view.mainProgressMs < watchdogMs;
}

/** A heartbeat on the lease channel: who sent it, and when, on the primary's clock. */
export interface LeaseHeartbeat {
  readonly epoch: number;
  /** Strictly increasing per key: a replayed datagram is never taken as a new one. */
  readonly counter: number;
  readonly sentMs: number;
}

/** What the standby's lease thread knows of the primary it follows. */
export interface StandbyChannelState {
  /** The epoch of the primary whose key it holds (the stream's hello). */
  readonly epoch: number;
  /** The highest counter taken under that key. */
  readonly lastCounter: number;
}

/**
 * Whether the standby takes a heartbeat (authenticated under the key of its current primary's
 * stream): of that primary's epoch, and newer than any before it.
 */
export function standbyTakes(state: StandbyChannelState, hb: LeaseHeartbeat): boolean {
  return hb.epoch === state.epoch && hb.counter > state.lastCounter;
}

/**
 * The primary's newest acknowledged send time after an acknowledgement: an acknowledgement
 * echoes a heartbeat's send time; one from the future (a forgery that passed no check, or a
 * bug) is never believed, and an old one changes nothing.
 */
export function newestAckedMs(previousMs: number, echoedSentMs: number, nowMs: number): number {
  if (echoedSentMs > nowMs) return previousMs;
  return Math.max(previousMs, echoedSentMs);
}

/** The layout of a lease datagram before its authentication tag (see lease-datagram.ts). */
export const LeaseDatagramKind = { heartbeat: 1, ack: 2 } as const;
export type LeaseDatagramKind = (typeof LeaseDatagramKind)[keyof typeof LeaseDatagramKind];
