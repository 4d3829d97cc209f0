// Proves the supervisor's decisions at their boundaries: the starting role from a probe (cold
// start of both, a live primary or replica peer, a higher peer epoch adopted, a node that has
// served waits for a silent peer instead of starting empty), a standby with no primary in
// sight (wait, take over with the replica left, or start afresh: exactly one acts), who wins when
// two primaries meet (epoch, then node id, and exactly one side wins), the promotion epoch,
// the standby's lease watch (self-pause, no primary yet, expiry at exactly one lease,
// eligibility) and the solo-work accounting a step-down reports.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  discardedOnStepDown,
  initialRole,
  NOTHING_DISCARDED,
  otherPrimaryWins,
  type PeerProbe,
  promotionEpoch,
  type StandbyRecovery,
  soloMarkAt,
  soloWork,
  standbyWithoutPrimary,
  stateDiscardedOnStepDown,
  stepDownEpoch,
  stepSoloMark,
  type WorkCounters,
  watchStandbyLease,
} from "./failover.js";
import { DEFAULT_LEASE_TERMS } from "./lease.js";

const t = DEFAULT_LEASE_TERMS; // lease 500 ms

const peer = (role: "primary" | "standby", epoch: number, replica = false, appliedSeq = 0) =>
  ({ role, epoch, replica, appliedSeq }) satisfies PeerProbe;

describe("initialRole", () => {
  it.each<[string, "primary" | "standby", number, PeerProbe | undefined, string, number]>([
    ["cold start, configured primary, no peer", "primary", 0, undefined, "primary", 1],
    ["cold start, configured standby, no peer", "standby", 0, undefined, "standby", 0],
    ["cold start of both", "primary", 0, peer("standby", 0), "primary", 1],
    ["both restart after serving", "primary", 4, peer("standby", 4), "primary", 5],
    ["restart after serving, peer silent: wait", "primary", 4, undefined, "standby", 4],
    ["peer primary at a higher epoch", "primary", 2, peer("primary", 3), "standby", 3],
    ["peer primary at a lower epoch", "primary", 5, peer("primary", 3), "standby", 5],
    ["peer standby with a replica", "primary", 2, peer("standby", 2, true, 9), "standby", 2],
    ["peer holds an ineligible replica", "primary", 2, peer("standby", 2, false, 9), "standby", 2],
    ["peer empty standby, higher epoch", "primary", 2, peer("standby", 6), "primary", 7],
    ["configured standby, peer empty", "standby", 1, peer("standby", 3), "standby", 3],
    ["configured standby, peer silent", "standby", 3, undefined, "standby", 3],
  ])("%s", (_, configured, own, probe, role, epoch) => {
    expect(initialRole(configured, own, probe)).toEqual({ role, epoch });
  });

  it("never lowers the epoch and a primary's is above every known one", () => {
    fc.assert(
      fc.property(
        fc.constantFrom<"primary" | "standby">("primary", "standby"),
        fc.nat(100),
        fc.option(
          fc.record({
            role: fc.constantFrom<"primary" | "standby">("primary", "standby"),
            epoch: fc.nat(100),
            replica: fc.boolean(),
            appliedSeq: fc.nat(3),
          }),
          { nil: undefined },
        ),
        (configured, own, peer) => {
          const d = initialRole(configured, own, peer);
          expect(d.epoch).toBeGreaterThanOrEqual(Math.max(own, peer?.epoch ?? 0));
          if (d.role === "primary") {
            expect(d.epoch).toBeGreaterThan(Math.max(own, peer?.epoch ?? 0));
            expect(configured).toBe("primary");
            // it throws nothing away: the peer holds nothing, or the pair never served
            expect(peer === undefined ? own : peer.appliedSeq).toBe(0);
          }
        },
      ),
    );
  });
});

describe("standbyWithoutPrimary", () => {
  const self = (configured: "primary" | "standby", epoch: number, holdsReplica: boolean) => ({
    configured,
    epoch,
    holdsReplica,
  });
  it.each<[string, ReturnType<typeof self>, PeerProbe | undefined, StandbyRecovery]>([
    ["peer silent", self("primary", 3, true), undefined, { action: "wait" }],
    ["peer primary", self("primary", 3, false), peer("primary", 4), { action: "wait" }],
    ["peer eligible", self("primary", 3, false), peer("standby", 3, true, 9), { action: "wait" }],
    [
      "peer holds state",
      self("primary", 3, false),
      peer("standby", 3, false, 9),
      { action: "wait" },
    ],
    [
      "peer empty, this one holds a replica",
      self("standby", 3, true),
      peer("standby", 5),
      { action: "takeOver", epoch: 6 },
    ],
    [
      "both empty, configured primary starts",
      self("primary", 7, false),
      peer("standby", 5),
      { action: "start", epoch: 8 },
    ],
    [
      "both empty, configured standby waits",
      self("standby", 7, false),
      peer("standby", 5),
      { action: "wait" },
    ],
  ])("%s", (_, me, probe, expected) => {
    expect(standbyWithoutPrimary(me, probe)).toEqual(expected);
  });

  it("exactly one of two empty-or-not standbys acts when they see each other", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.boolean(), fc.nat(5), fc.nat(5), (aHolds, bHolds, ea, eb) => {
        // a is configured primary, b standby; each sees the other as a standby.
        const a = standbyWithoutPrimary(
          self("primary", ea, aHolds),
          peer("standby", eb, false, bHolds ? 7 : 0),
        );
        const b = standbyWithoutPrimary(
          self("standby", eb, bHolds),
          peer("standby", ea, false, aHolds ? 7 : 0),
        );
        const acting = [a, b].filter((d) => d.action !== "wait").length;
        expect(acting).toBe(aHolds && bHolds ? 0 : 1);
      }),
    );
  });
});

describe("otherPrimaryWins", () => {
  it.each([
    [{ epoch: 3, nodeId: "a" }, { epoch: 4, nodeId: "b" }, true],
    [{ epoch: 4, nodeId: "b" }, { epoch: 3, nodeId: "a" }, false],
    [{ epoch: 3, nodeId: "b" }, { epoch: 3, nodeId: "a" }, true],
    [{ epoch: 3, nodeId: "a" }, { epoch: 3, nodeId: "b" }, false],
  ])("%j meets %j → other wins %s", (self, other, wins) => {
    expect(otherPrimaryWins(self, other)).toBe(wins);
  });

  it("exactly one of two distinct primaries wins", () => {
    fc.assert(
      fc.property(fc.nat(5), fc.nat(5), fc.string(), fc.string(), (ea, eb, a, b) => {
        fc.pre(a !== b);
        const x = { epoch: ea, nodeId: a };
        const y = { epoch: eb, nodeId: b };
        expect(otherPrimaryWins(x, y)).toBe(!otherPrimaryWins(y, x));
      }),
    );
  });
});

describe("epochs", () => {
  it("promotes above its own and any seen epoch", () => {
    expect(promotionEpoch(2, 1)).toBe(3);
    expect(promotionEpoch(2, 5)).toBe(6);
    expect(promotionEpoch(0, 0)).toBe(1);
  });

  it("steps down to the higher epoch", () => {
    expect(stepDownEpoch(3, 4)).toBe(4);
    expect(stepDownEpoch(4, 3)).toBe(4);
  });
});

describe("watchStandbyLease", () => {
  const look = (lastWatchMs: number | undefined, lastMessageMs: number | undefined, now: number) =>
    watchStandbyLease({ lastWatchMs, lastMessageMs }, now, t, true);

  it("waits while no primary has spoken", () => {
    expect(look(undefined, undefined, 1000).verdict).toBe("no-primary");
    expect(look(0, undefined, 10_000).verdict).toBe("no-primary");
  });

  it("expires at exactly one lease after the last message", () => {
    expect(look(1499, 1000, 1499).verdict).toBe("live");
    expect(look(1499, 1000, 1500).verdict).toBe("promote");
  });

  it("does not promote an ineligible standby", () => {
    const r = watchStandbyLease({ lastWatchMs: 1500, lastMessageMs: 1000 }, 1600, t, false);
    expect(r.verdict).toBe("ineligible");
  });

  it("a gap above half a lease between looks is its own pause: judged from the wake-up", () => {
    const woke = look(1000, 1000, 1251);
    expect(woke.verdict).toBe("woke");
    expect(woke.watch).toEqual({ lastWatchMs: 1251, lastMessageMs: 1251 });
    // exactly half a lease is not a pause
    expect(look(1000, 1000, 1250).verdict).toBe("live");
    // after waking, one more whole lease of silence is needed
    expect(look(1740, 1251, 1750).verdict).toBe("live");
    expect(look(1740, 1251, 1751).verdict).toBe("promote");
  });

  it("the first look is never a pause", () => {
    expect(look(undefined, 0, 10_000).verdict).toBe("promote");
  });
});

describe("solo work", () => {
  const at = (lastSeq: number, frames: number, acknowledged: number, sessions: number) =>
    ({ lastSeq, frames, acknowledged, sessions }) satisfies WorkCounters;

  it("marks when the lease is first lost and keeps the first mark", () => {
    const first = stepSoloMark("fenced", undefined, 10, at(12, 5, 4, 1));
    expect(first).toEqual({ fromSeq: 10, frames: 5, acknowledged: 4, sessions: 1 });
    expect(stepSoloMark("degraded", first, 11, at(20, 9, 9, 2))).toBe(first);
    expect(stepSoloMark("leased", first, 20, at(20, 9, 9, 2))).toBeUndefined();
  });

  it("counts everything since the mark", () => {
    const mark = soloMarkAt(10, at(12, 5, 4, 1));
    expect(soloWork(mark, at(20, 9, 7, 3))).toEqual({
      entries: 10,
      frames: 4,
      acknowledgedFrames: 3,
      sessions: 2,
    });
    expect(soloWork(undefined, at(20, 9, 7, 3))).toEqual(NOTHING_DISCARDED);
  });

  it("discards nothing after a handover", () => {
    const solo = { entries: 1, frames: 1, acknowledgedFrames: 1, sessions: 0 };
    expect(discardedOnStepDown(true, solo)).toEqual(NOTHING_DISCARDED);
    expect(discardedOnStepDown(false, solo)).toBe(solo);
  });
});

describe("stateDiscardedOnStepDown", () => {
  const held = { sessions: 3, contexts: 5, vramBytes: 1 << 20 };
  it("reports everything held and the entries the peer never confirmed", () => {
    expect(stateDiscardedOnStepDown(false, held, 120, 100)).toEqual({ ...held, entries: 20 });
    // A primary whose peer confirmed nothing in its epoch loses every entry of it.
    expect(stateDiscardedOnStepDown(false, held, 120, 0).entries).toBe(120);
  });
  it("reports nothing after a handover (the state is kept)", () => {
    expect(stateDiscardedOnStepDown(true, held, 120, 100)).toEqual({
      sessions: 0,
      contexts: 0,
      vramBytes: 0,
      entries: 0,
    });
  });
});
