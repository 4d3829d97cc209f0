// Proves the idle rule with explicit times: a session is reaped once no stream has been
// attached for idleMs since its last detach (never while attached, never with idleMs 0), a
// session first seen by a tick (a new primary's) starts its idle time then, the longest idle
// go first and at most `max` per tick, and closed sessions are forgotten.
import { describe, expect, it } from "vitest";
import { IdleSessions } from "./idle-sessions.js";

const ALL = 1000;

describe("IdleSessions", () => {
  it("reaps a session idleMs after its stream detached, not before", () => {
    const idle = new IdleSessions(600_000);
    idle.attach("a");
    idle.detach("a", 1_000);
    expect(idle.tick(["a"], 600_999, ALL)).toEqual([]);
    expect(idle.tick(["a"], 601_000, ALL)).toEqual(["a"]);
    expect(idle.activity("a")).toEqual({
      openedMs: undefined,
      attached: false,
      idleSinceMs: 1_000,
    });
  });

  it("never reaps an attached session, however long", () => {
    const idle = new IdleSessions(10);
    idle.attach("a");
    expect(idle.tick(["a"], 1e9, ALL)).toEqual([]);
    expect(idle.activity("a")).toEqual({
      openedMs: undefined,
      attached: true,
      idleSinceMs: undefined,
    });
  });

  it("restarts the idle time when a stream attaches again", () => {
    const idle = new IdleSessions(100);
    idle.detach("a", 0);
    idle.attach("a");
    idle.detach("a", 90);
    expect(idle.tick(["a"], 150, ALL)).toEqual([]);
    expect(idle.tick(["a"], 190, ALL)).toEqual(["a"]);
  });

  it("reaps nothing with idleMs 0", () => {
    const idle = new IdleSessions(0);
    idle.detach("a", 0);
    expect(idle.tick(["a"], Number.MAX_SAFE_INTEGER, ALL)).toEqual([]);
  });

  it("starts the idle time of a session it had not seen at the tick that sees it (failover)", () => {
    const idle = new IdleSessions(100);
    // A new primary: the session was idle for ages on the old one; here it starts at 5000.
    expect(idle.tick(["old"], 5_000, ALL)).toEqual([]);
    expect(idle.activity("old")).toMatchObject({ attached: false, idleSinceMs: 5_000 });
    expect(idle.tick(["old"], 5_099, ALL)).toEqual([]);
    expect(idle.tick(["old"], 5_100, ALL)).toEqual(["old"]);
  });

  it("a session resumed before the first tick is attached, not idle", () => {
    const idle = new IdleSessions(100);
    idle.attach("resumed");
    expect(idle.tick(["resumed", "other"], 0, ALL)).toEqual([]);
    expect(idle.tick(["resumed", "other"], 100, ALL)).toEqual(["other"]);
  });

  it("gives the longest idle first, at most max per tick", () => {
    const idle = new IdleSessions(10);
    idle.detach("c", 3);
    idle.detach("a", 1);
    idle.detach("b", 2);
    idle.attach("c");
    idle.detach("c", 4);
    expect(idle.tick(["a", "b", "c"], 100, 2)).toEqual(["a", "b"]);
    expect(idle.tick(["a", "b", "c"], 100, ALL)).toEqual(["a", "b", "c"]);
  });

  it("remembers when this node opened a session, until it is closed", () => {
    const idle = new IdleSessions(10);
    idle.opened("a", 7);
    expect(idle.activity("a")).toEqual({ openedMs: 7, attached: true, idleSinceMs: undefined });
    idle.detach("a", 9);
    expect(idle.activity("a")).toEqual({ openedMs: 7, attached: false, idleSinceMs: 9 });
    idle.forget("a");
    expect(idle.activity("a").openedMs).toBeUndefined();
  });

  it("forgets sessions that were closed or are no longer open", () => {
    const idle = new IdleSessions(10);
    idle.opened("closed", 0);
    idle.detach("closed", 0);
    idle.forget("closed");
    idle.detach("gone", 0);
    idle.attach("gone-attached");
    expect(idle.tick(["x"], 5, ALL)).toEqual([]);
    const forgotten = { openedMs: undefined, attached: false, idleSinceMs: undefined };
    expect(idle.activity("closed")).toEqual(forgotten);
    expect(idle.activity("gone")).toEqual(forgotten);
    expect(idle.activity("gone-attached")).toEqual(forgotten);
    expect(idle.tick(["x", "gone"], 20, ALL)).toEqual(["x"]);
  });
});
