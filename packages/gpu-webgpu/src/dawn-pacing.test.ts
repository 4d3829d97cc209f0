// Proves the Dawn event pacer runs every callback it is given, in order, at most once per
// interval, and that only a native module's lone callback is taken from setImmediate — with a
// fake clock and a hand-turned scheduler (no Dawn).
import { describe, expect, it } from "vitest";
import { EventPacer, isNativeCallback } from "./dawn-pacing.js";

/** A pacer on a fake clock; `turn()` runs what was scheduled, as one event-loop turn. */
function rig(intervalMs: number) {
  let nowMs = 0;
  let scheduled: (() => void)[] = [];
  const pacer = new EventPacer(
    intervalMs,
    () => nowMs,
    (run) => scheduled.push(run),
  );
  return {
    pacer,
    advance(ms: number) {
      nowMs += ms;
    },
    turn() {
      const due = scheduled;
      scheduled = [];
      for (const run of due) run();
      return due.length;
    },
  };
}

describe("EventPacer", () => {
  it("runs a callback at the next turn when none ran within the interval", () => {
    const r = rig(0.05);
    const ran: string[] = [];
    r.pacer.offer(() => ran.push("a"));
    expect(ran).toEqual([]);
    r.turn();
    expect(ran).toEqual(["a"]);
  });

  it("holds a callback offered within the interval until the interval has passed", () => {
    const r = rig(0.05);
    const ran: number[] = [];
    r.pacer.offer(() => ran.push(1));
    r.turn();
    r.pacer.offer(() => ran.push(2));
    r.advance(0.02);
    r.turn();
    r.advance(0.02);
    r.turn();
    expect(ran).toEqual([1]); // 0.04 ms since the last run: still waiting
    r.advance(0.02);
    r.turn();
    expect(ran).toEqual([1, 2]);
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
    r.advance(0.05);
    r.turn();
    expect(ran).toEqual(["a", "b", "c"]);
  });

  it("with interval 0 runs each turn's callbacks at that turn", () => {
    const r = rig(0);
    let runs = 0;
    const poll = () => {
      runs++;
      if (runs < 5) r.pacer.offer(poll);
    };
    r.pacer.offer(poll);
    for (let i = 0; i < 5; i++) r.turn();
    expect(runs).toBe(5);
    expect(r.pacer.taken).toBe(5);
  });

  it("keeps the callbacks after one that throws for the next turn", () => {
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
