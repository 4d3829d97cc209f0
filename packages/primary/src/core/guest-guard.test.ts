// Proves the guest listener's decisions on a fake clock: the per-source connection cap, the
// per-connection new-stream bucket (abuse penalises the source), the penalty box (its expiry,
// its bound, penalty 0), and the first-message deadlines in arrival order.
import { describe, expect, it } from "vitest";
import { FirstMessageDeadlines, type GuardedConnection, GuestGuard } from "./guest-guard.js";

const LIMITS = {
  maxConnectionsPerSource: 2,
  maxNewStreamsPerConnectionPerSecond: 10,
  newStreamBurstPerConnection: 5,
  maxEarlyResetsPerConnectionPerSecond: 2,
  earlyResetBurstPerConnection: 3,
  abusePenaltyMs: 1000,
};

const accepted = (c: GuardedConnection | string): GuardedConnection => {
  if (typeof c === "string") throw new Error(`refused: ${c}`);
  return c;
};

describe("GuestGuard", () => {
  it("caps the connections one source holds at once, and frees a slot on close", () => {
    const g = new GuestGuard(LIMITS);
    const a = accepted(g.accept("10.0.0.1", 0));
    accepted(g.accept("10.0.0.1", 0));
    expect(g.accept("10.0.0.1", 0)).toBe("connections_per_source");
    accepted(g.accept("10.0.0.2", 0)); // another source is counted apart
    g.closed(a);
    g.closed(a); // idempotent
    expect(g.connectionsOf("10.0.0.1")).toBe(1);
    accepted(g.accept("10.0.0.1", 0));
  });

  it("lets a connection open its burst, then its rate; past it the source is penalised", () => {
    const g = new GuestGuard(LIMITS);
    const c = accepted(g.accept("10.0.0.1", 0));
    for (let i = 0; i < 5; i++) expect(g.newStream(c, 0)).toBe(true);
    expect(g.newStream(c, 50)).toBe(false); // 0.5 token refilled: not enough
    expect(g.penalised("10.0.0.1", 50)).toBe(true);
    expect(g.accept("10.0.0.1", 500)).toBe("penalty");
    expect(g.penalised("10.0.0.2", 500)).toBe(false);
    // The penalty ends 1000 ms after the abuse, and is then forgotten.
    accepted(g.accept("10.0.0.1", 1050));
    expect(g.penalisedSources).toBe(0);
  });

  it("penalises a connection that cancels streams before they are answered, past its budget", () => {
    const g = new GuestGuard(LIMITS);
    const c = accepted(g.accept("s", 0));
    for (let i = 0; i < 3; i++) expect(g.earlyReset(c, 0)).toBe(true);
    expect(g.earlyReset(c, 100)).toBe(false); // 0.2 refilled: not enough
    expect(g.accept("s", 200)).toBe("penalty");
  });

  it("refills a connection's streams at the configured rate", () => {
    const g = new GuestGuard(LIMITS);
    const c = accepted(g.accept("s", 0));
    for (let i = 0; i < 5; i++) g.newStream(c, 0);
    // 10/s: one stream every 100 ms is within the rate, for ever.
    for (let t = 100; t <= 5000; t += 100) expect(g.newStream(c, t)).toBe(true);
    expect(g.penalised("s", 5000)).toBe(false);
  });

  it("closes abusers without a penalty when abusePenaltyMs is 0", () => {
    const g = new GuestGuard({ ...LIMITS, abusePenaltyMs: 0 });
    const c = accepted(g.accept("s", 0));
    for (let i = 0; i < 5; i++) g.newStream(c, 0);
    expect(g.newStream(c, 0)).toBe(false);
    expect(g.penalised("s", 0)).toBe(false);
    accepted(g.accept("s", 0));
  });

  it("holds at most maxPenalisedSources, forgetting the oldest penalty first", () => {
    const g = new GuestGuard({ ...LIMITS, maxPenalisedSources: 3 });
    for (const s of ["a", "b", "c"]) g.penalise(s, 0);
    g.penalise("a", 1); // renewed: now the newest
    g.penalise("d", 2);
    expect(g.penalisedSources).toBe(3);
    expect(g.penalised("b", 3)).toBe(false);
    for (const s of ["a", "c", "d"]) expect(g.penalised(s, 3)).toBe(true);
  });
});

describe("FirstMessageDeadlines", () => {
  it("expires items in arrival order once they have waited the timeout", () => {
    const d = new FirstMessageDeadlines<string>(100);
    expect(d.nextDueMs()).toBeUndefined();
    d.add("a", 0);
    d.add("b", 30);
    d.add("c", 60);
    d.remove("b"); // its first message came
    expect(d.nextDueMs()).toBe(100);
    expect(d.expired(99)).toEqual([]);
    expect(d.expired(100)).toEqual(["a"]);
    expect(d.nextDueMs()).toBe(160);
    expect(d.expired(1000)).toEqual(["c"]);
    expect(d.size).toBe(0);
  });
});
