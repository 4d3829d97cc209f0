// Proves the session limits: per tenant, in total, and the per-tenant token bucket of new
// sessions, driven by a fake clock; a refusal takes nothing from the bucket.
import { describe, expect, it } from "vitest";
import { SessionAdmission } from "./session-admission.js";

const LIMITS = { maxSessionsPerTenant: 3, maxSessionsTotal: 5, opensPerSecond: 2, openBurst: 4 };

function admission() {
  let now = 1000;
  const a = new SessionAdmission(LIMITS, () => now);
  return {
    a,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe("SessionAdmission", () => {
  it("refuses a tenant's session above its own limit and above the node's", () => {
    const { a } = admission();
    expect(a.admit("t", { total: 2, ofTenant: 2 })).toBeNull();
    expect(a.admit("t", { total: 3, ofTenant: 3 })).toEqual({
      reason: "tenant has 3 sessions open, limit 3",
      waitMs: 0,
    });
    expect(a.admit("u", { total: 5, ofTenant: 0 })).toEqual({
      reason: "node has no room for another session (limit 5)",
      waitMs: 0,
    });
  });

  it("lets a burst through, then the average rate, per tenant", () => {
    const { a, advance } = admission();
    const none = { total: 0, ofTenant: 0 };
    const burst = Array.from({ length: 6 }, () => a.admit("t", none));
    expect(burst.filter((r) => r === null)).toHaveLength(4);
    // Refused, with the time until the next token (2/s: 500 ms).
    expect(burst[4]).toEqual({ reason: "session opens above 2 per second (burst 4)", waitMs: 500 });
    // Another tenant has a bucket of its own.
    expect(a.admit("u", none)).toBeNull();
    advance(499);
    expect(a.admit("t", none)).not.toBeNull();
    advance(1); // 500 ms at 2/s: one token
    expect(a.admit("t", none)).toBeNull();
    expect(a.admit("t", none)).not.toBeNull();
    advance(60_000); // refills to the burst, no further
    expect(
      Array.from({ length: 5 }, () => a.admit("t", none)).filter((r) => r === null),
    ).toHaveLength(4);
  });

  it("takes no token for a session refused by a count", () => {
    const { a } = admission();
    for (let i = 0; i < 10; i++) a.admit("t", { total: 0, ofTenant: 3 });
    const none = { total: 0, ofTenant: 0 };
    expect(Array.from({ length: 4 }, () => a.admit("t", none))).toEqual([null, null, null, null]);
  });

  it("does not refill when the clock goes backwards", () => {
    let now = 10_000;
    const a = new SessionAdmission(LIMITS, () => now);
    for (let i = 0; i < 4; i++) a.admit("t", { total: 0, ofTenant: 0 });
    now = 0;
    expect(a.admit("t", { total: 0, ofTenant: 0 })).not.toBeNull();
  });
});
