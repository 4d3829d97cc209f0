// The peer lease, as pure functions of monotonic times (milliseconds, each node's own clock).
//
// The primary renews its lease with every acknowledged heartbeat and counts it from the time
// it SENT that heartbeat; the standby counts from when it RECEIVED the newest message. Sending
// precedes receiving, so the primary's lease always starts no later than the standby's view
// of it. Clocks may run at rates differing by up to `maxDriftRatio`; the primary ends its lease
// `driftMarginMs` early, and the terms are only valid when that margin covers the worst drift
// over a whole lease. Then the primary has stopped acknowledging guests before the standby can
// promote.

export interface LeaseTerms {
  /** How long a lease lasts without renewal. */
  readonly leaseMs: number;
  /** How often the primary sends a heartbeat. */
  readonly heartbeatMs: number;
  /** How much earlier than the standby the primary gives its lease up. */
  readonly driftMarginMs: number;
  /** Largest relative difference of the two clocks' rates (e.g. 0.01 for 1 %). */
  readonly maxDriftRatio: number;
}

export const DEFAULT_LEASE_TERMS: LeaseTerms = {
  leaseMs: 500,
  heartbeatMs: 100,
  driftMarginMs: 50,
  maxDriftRatio: 0.01,
};

/** Why the terms are unsafe or useless, or null when they are fine. */
export function checkLeaseTerms(t: LeaseTerms): string | null {
  if (!(t.leaseMs > 0 && t.heartbeatMs > 0 && t.driftMarginMs >= 0)) {
    return "lease, heartbeat and margin must be positive";
  }
  if (t.heartbeatMs * 3 > t.leaseMs) {
    return `heartbeat ${t.heartbeatMs} ms must be at most a third of the lease ${t.leaseMs} ms`;
  }
  if (t.driftMarginMs >= t.leaseMs - t.heartbeatMs) {
    return `drift margin ${t.driftMarginMs} ms leaves no lease after a heartbeat interval`;
  }
  const needed = minimumDriftMarginMs(t.leaseMs, t.maxDriftRatio);
  if (t.driftMarginMs < needed) {
    return `drift margin ${t.driftMarginMs} ms is below ${needed} ms, what a ${t.maxDriftRatio * 100} % clock drift needs over ${t.leaseMs} ms`;
  }
  return null;
}

/**
 * The margin that keeps the primary's end before the standby's when their clocks' rates differ
 * by `ratio`: the primary's (lease − margin) of its time must be shorter in real time than the
 * standby's lease of its time: (L − m)(1 + ρ) < L(1 − ρ)  ⇔  m > 2ρL / (1 + ρ).
 */
export function minimumDriftMarginMs(leaseMs: number, ratio: number): number {
  return Math.floor((2 * ratio * leaseMs) / (1 + ratio)) + 1;
}

/** When the primary's lease ends, given the send time of its newest acknowledged heartbeat. */
export function primaryLeaseEndMs(ackedHeartbeatSentMs: number, t: LeaseTerms): number {
  return ackedHeartbeatSentMs + t.leaseMs - t.driftMarginMs;
}

/** Whether the primary still holds its lease at `nowMs` (its own clock). */
export function primaryHoldsLease(
  nowMs: number,
  ackedHeartbeatSentMs: number,
  t: LeaseTerms,
): boolean {
  return nowMs < primaryLeaseEndMs(ackedHeartbeatSentMs, t);
}

/** Whether the standby may take over at `nowMs`: nothing received for a whole lease. */
export function standbyLeaseExpired(nowMs: number, lastReceivedMs: number, t: LeaseTerms): boolean {
  return nowMs - lastReceivedMs >= t.leaseMs;
}
