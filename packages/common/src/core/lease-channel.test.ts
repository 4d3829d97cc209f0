// Proves the lease channel's rules: the thread renews only while the main loop turned within
// the watchdog and wants renewal; the standby takes only its primary's epoch and newer
// counters (no replays); an acknowledgement never moves the newest acknowledged time back or
// into the future.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { mayRenew, newestAckedMs, standbyTakes } from "./lease-channel.js";

describe("mayRenew", () => {
  it("renews while the main loop turned within the watchdog and wants renewal", () => {
    expect(mayRenew(1000, { mainProgressMs: 900, renewing: true }, 2000)).toBe(true);
    expect(mayRenew(2899, { mainProgressMs: 900, renewing: true }, 2000)).toBe(true);
    expect(mayRenew(2900, { mainProgressMs: 900, renewing: true }, 2000)).toBe(false);
    expect(mayRenew(1000, { mainProgressMs: 999, renewing: false }, 2000)).toBe(false);
  });
});

describe("standbyTakes", () => {
  it("takes its primary's epoch with a newer counter only", () => {
    const state = { epoch: 3, lastCounter: 10 };
    expect(standbyTakes(state, { epoch: 3, counter: 11, sentMs: 0 })).toBe(true);
    expect(standbyTakes(state, { epoch: 3, counter: 10, sentMs: 0 })).toBe(false); // a replay
    expect(standbyTakes(state, { epoch: 4, counter: 11, sentMs: 0 })).toBe(false);
    expect(standbyTakes(state, { epoch: 2, counter: 99, sentMs: 0 })).toBe(false);
  });
});

describe("newestAckedMs", () => {
  it("only grows, and never past now", () => {
    fc.assert(
      fc.property(fc.nat(), fc.nat(), fc.nat(), (prev, echoed, now) => {
        const next = newestAckedMs(prev, echoed, now);
        expect(next).toBeGreaterThanOrEqual(prev);
        if (next !== prev) expect(next).toBeLessThanOrEqual(now);
      }),
    );
  });
});
