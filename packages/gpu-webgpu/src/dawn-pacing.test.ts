// Proves the Dawn event pacer runs every callback it is given, in order, spaced by intervals
// that start short and double up to the longest, and that only a native module's lone
// callback is taken from setImmediate — with a fake clock and a hand-turned scheduler.
import { describe, expect, it } from "vitest";
import { EventPacer, isNativeCallback } from "./dawn-pacing.js";

/** A pacer on a fake clock; `turn()` runs what was scheduled, as one event-loop turn. */
function rig(maxMs: number) {
  const clock = { ms: 0 };
  let scheduled: (() => void)[] = [];
  const pacer = new EventPacer(
    maxMs,
    () => clock.ms,
    (run) => scheduled.push(run),
  );
  return {
    pacer,
    clock,
    advance(ms: number) {
      clock.ms += ms;
    },
    turn() {
      const due = scheduled;
      scheduled = [];
      for (const run of due) run();
      return due.length;
    },
  };
}

/** Keeps a chain going: each run offers the next poll, as Dawn's runner does. */
function chain(r: ReturnType<typeof rig>, runsAt: number[], clock: { ms: number }, polls: number) {
  const poll = () => {
    runsAt.push(clock.ms);
    if (runsAt.length < polls) r.pacer.offer(poll);
  };
  r.pacer.offer(poll);
}

/** `n` event-loop turns, 5 µs apart. */
function turns(r: ReturnType<typeof rig>, n: number) {
  for (let i = 0; i < n; i++) {
    r.turn();
    r.advance(0.005);
  }
}

/** The gaps between runs (µs) are the expected ones, give or take one 5 µs turn. */
function expectGaps(runsAt: readonly number[], expectedUs: readonly number[]) {
  const gaps = runsAt.slice(1).map((t, i) => (t - runsAt[i]!) * 1000);
  expect(gaps).toHaveLength(expectedUs.length);
  for (const [i, gap] of gaps.entries()) {
    expect(gap).toBeGreaterThan(expectedUs[i]! - 1e-6);
    expect(gap).toBeLessThan(expectedUs[i]! + 5 + 1e-6);
  }
}

describe("EventPacer", () => {
  it("runs the first poll of a chain at the next turn", () => {
    const r = rig(0.2);
    const ran: string[] = [];
    r.pacer.offer(() => ran.push("a"));
    expect(ran).toEqual([]);
    r.turn();
    expect(ran).toEqual(["a"]);
  });

  it("spaces a chain's polls from 10 µs, doubling up to the longest interval", () => {
    const r = rig(0.2);
    const runsAt: number[] = [];
    chain(r, runsAt, r.clock, 8);
    // Turns every 5 µs for 1 ms.
    turns(r, 200);
    expectGaps(runsAt, [10, 20, 40, 80, 160, 200, 200]);
  });

  it("starts a new chain at the short interval once the last one ended", () => {
    const r = rig(0.2);
    const first: number[] = [];
    chain(r, first, r.clock, 6);
    turns(r, 200);
    expect(first).toHaveLength(6);
    const second: number[] = [];
    chain(r, second, r.clock, 3);
    turns(r, 20);
    expectGaps(second, [10, 20]);
  });

  it("runs every callback queued meanwhile, in order, and one offered while running later", () => {
    const r = rig(0.05);
    const ran: string[] = [];
    r.pacer.offer(() => {
      ran.push("a");
      r.pacer.offer(() => ran.push("c"));
    });
    r.pacer.offer(() => ran.push("b"));
    r.turn();
    expect(ran).toEqual(["a", "b"]);
    r.turn();
    expect(ran).toEqual(["a", "b"]); // 10 µs not yet passed
    r.advance(0.01);
    r.turn();
    expect(ran).toEqual(["a", "b", "c"]);
  });

  it("with a longest interval of 0 runs each turn's callbacks at that turn", () => {
    const r = rig(0);
    const runsAt: number[] = [];
    chain(r, runsAt, r.clock, 5);
    for (let i = 0; i < 5; i++) r.turn();
    expect(runsAt).toHaveLength(5);
    expect(r.pacer.taken).toBe(5);
  });

  it("keeps the callbacks after one that throws for the next run", () => {
    const r = rig(0.05);
    const ran: string[] = [];
    r.pacer.offer(() => {
      throw new Error("boom");
    });
    r.pacer.offer(() => ran.push("after"));
    expect(() => r.turn()).toThrow("boom");
    expect(ran).toEqual([]);
    r.advance(0.05);
    expect(r.turn()).toBe(1);
    expect(ran).toEqual(["after"]);
  });

  it("schedules nothing while nothing is queued (an idle loop stays idle)", () => {
    const r = rig(0.05);
    r.pacer.offer(() => {});
    expect(r.turn()).toBe(1);
    expect(r.turn()).toBe(0);
  });
});

describe("isNativeCallback", () => {
  it("takes a native function with no name passed alone (how Dawn queues its polls)", () => {
    // A proxy of an anonymous function reads as native code, as a Node-API function does.
    // biome-ignore lint/complexity/useArrowFunction: Node-API functions have a prototype
    const native = new Proxy([function () {}][0]!, {});
    expect(isNativeCallback(native, 0)).toBe(true);
    expect(isNativeCallback(native, 1)).toBe(false);
  });

  it("leaves JavaScript callbacks and bound or named functions alone", () => {
    expect(isNativeCallback(() => {}, 0)).toBe(false);
    // biome-ignore lint/complexity/useArrowFunction: an anonymous function has a prototype
    const anonymous = [function () {}][0]!;
    expect(anonymous.name).toBe("");
    expect(isNativeCallback(anonymous, 0)).toBe(false);
    expect(isNativeCallback(function named() {}, 0)).toBe(false);
    expect(isNativeCallback((() => {}).bind(null), 0)).toBe(false);
    expect(isNativeCallback(Math.max, 0)).toBe(false);
  });
});
