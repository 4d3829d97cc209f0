// Proves the lease rule at its boundaries: validation of the terms, the primary's end counted
// from the send time minus the margin, the standby's from receipt, and that under the worst
// allowed clock drift the primary's lease always ends before the standby may promote.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  checkLeaseTerms,
  DEFAULT_LEASE_TERMS,
  minimumDriftMarginMs,
  primaryHoldsLease,
  primaryLeaseEndMs,
  standbyLeaseExpired,
} from "./lease.js";

const t = DEFAULT_LEASE_TERMS;

describe("lease terms", () => {
  it("accepts the defaults", () => expect(checkLeaseTerms(t)).toBeNull());

  it.each([
    [{ ...t, heartbeatMs: 200 }, /at most a third/],
    [{ ...t, heartbeatMs: 0 }, /positive/],
    [{ ...t, driftMarginMs: 400 }, /leaves no lease/],
    [{ ...t, driftMarginMs: 5 }, /below 10 ms/],
    [{ ...t, maxDriftRatio: 0.1, driftMarginMs: 50 }, /below 91 ms/],
  ])("refuses %j", (terms, why) => expect(checkLeaseTerms(terms)).toMatch(why));

  it("computes the minimum margin for a drift", () => {
    expect(minimumDriftMarginMs(500, 0.01)).toBe(10);
    expect(minimumDriftMarginMs(500, 0)).toBe(1);
  });
});

describe("primary lease", () => {
  it("ends lease − margin after the acknowledged heartbeat was sent", () => {
    expect(primaryLeaseEndMs(1000, t)).toBe(1450);
    expect(primaryHoldsLease(1449.999, 1000, t)).toBe(true);
    expect(primaryHoldsLease(1450, 1000, t)).toBe(false);
  });
});

describe("standby lease", () => {
  it("expires a whole lease after the last receipt", () => {
    expect(standbyLeaseExpired(1499.999, 1000, t)).toBe(false);
    expect(standbyLeaseExpired(1500, 1000, t)).toBe(true);
  });
});

describe("safety under drift", () => {
  it("the primary stops before the standby may promote, for any valid terms and drift", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 30, max: 10_000 }),
        fc.double({ min: 0, max: 0.05, noNaN: true }),
        fc.double({ min: -1, max: 1, noNaN: true }),
        fc.integer({ min: 0, max: 1000 }),
        (leaseMs, ratio, driftSign, delayMs) => {
          const terms = {
            leaseMs,
            heartbeatMs: Math.floor(leaseMs / 3),
            driftMarginMs: minimumDriftMarginMs(leaseMs, ratio),
            maxDriftRatio: ratio,
          };
          fc.pre(checkLeaseTerms(terms) === null);
          // Real time: the heartbeat is sent at 0 and received at delay >= 0. Each clock runs
          // at its own rate within the ratio; the primary's end and the standby's promotion
          // are converted back to real time.
          const primaryRate = 1 + ratio * driftSign;
          const standbyRate = 1 - ratio * driftSign;
          const primaryEndReal = primaryLeaseEndMs(0, terms) / primaryRate;
          const standbyPromoteReal = delayMs + terms.leaseMs / standbyRate;
          return primaryEndReal < standbyPromoteReal;
        },
      ),
      { numRuns: 2000 },
    );
  });
});
