// Proves the switchover's states: a drain waits until the standby applied everything, every
// reply is out and (etcd) the record names it; fails past its deadline or when the standby
// falls out of sync; reuses the announced digest when nothing came after; a handover gets a
// deadline of its own.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  beginSwitchover,
  handOver,
  pollDrain,
  SWITCHOVER_IDLE,
  type SwitchoverFacts,
} from "./primary-switchover.js";

const facts = (over: Partial<SwitchoverFacts> = {}): SwitchoverFacts => ({
  nowMs: 0,
  lastSeq: 10,
  appliedSeq: 10,
  inSync: true,
  heldReplies: 0,
  unnamed: false,
  ...over,
});

describe("a draining switchover", () => {
  const draining = beginSwitchover(0, 1_000, 10);

  it("is ready once all is applied and out, reusing the announced digest", () => {
    expect(pollDrain(draining, facts())).toEqual({ kind: "ready", lastSeq: 10, reuseDigest: true });
    expect(pollDrain(draining, facts({ lastSeq: 12, appliedSeq: 12 }))).toEqual({
      kind: "ready",
      lastSeq: 12,
      reuseDigest: false,
    });
  });

  it("waits for the standby, the held replies and the record's name", () => {
    expect(pollDrain(draining, facts({ appliedSeq: 9 })).kind).toBe("wait");
    expect(pollDrain(draining, facts({ heldReplies: 1 })).kind).toBe("wait");
    expect(pollDrain(draining, facts({ unnamed: true })).kind).toBe("wait");
  });

  it("fails past its deadline or out of sync", () => {
    expect(pollDrain(draining, facts({ appliedSeq: 9, nowMs: 1_001 }))).toEqual({
      kind: "failed",
      why: "standby at 9 of 10: not handing over",
    });
    expect(pollDrain(draining, facts({ appliedSeq: 9, inSync: false })).kind).toBe("failed");
  });

  it("is never ready while anything is outstanding (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 20 }),
        fc.integer({ min: 0, max: 20 }),
        fc.integer({ min: 0, max: 3 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 2_000 }),
        (lastSeq, appliedSeq, heldReplies, unnamed, nowMs) => {
          const f = facts({ lastSeq, appliedSeq, heldReplies, unnamed, nowMs });
          const step = pollDrain(draining, f);
          const outstanding = appliedSeq < lastSeq || heldReplies > 0 || unnamed;
          expect(step.kind === "ready").toBe(!outstanding);
          if (step.kind === "failed") expect(nowMs).toBeGreaterThan(1_000);
        },
      ),
    );
  });

  it("is not polled outside the draining state", () => {
    expect(pollDrain(SWITCHOVER_IDLE, facts()).kind).toBe("failed");
  });
});

describe("a handover", () => {
  it("starts its own deadline and keeps the seq and digest", () => {
    const handing = handOver(beginSwitchover(0, 1_000, 10), 400, 10, "d");
    expect(handing).toEqual({
      phase: "handing",
      startedMs: 0,
      deadlineMs: 1_400,
      lastSeq: 10,
      digest: "d",
    });
  });

  it("only follows a drain", () => {
    expect(handOver(SWITCHOVER_IDLE, 0, 1, "d")).toBe(SWITCHOVER_IDLE);
  });

  it("keeps the drain's start for the pause it reports", () => {
    const handing = handOver(beginSwitchover(7, 100, 3), 50, 3, "x");
    expect(handing.phase === "handing" && handing.startedMs).toBe(7);
  });
});

describe("beginning", () => {
  it("announces at the given seq with a deadline timeoutMs away", () => {
    expect(beginSwitchover(5, 1_000, 42)).toEqual({
      phase: "draining",
      startedMs: 5,
      deadlineMs: 1_005,
      timeoutMs: 1_000,
      announcedSeq: 42,
    });
  });
});
