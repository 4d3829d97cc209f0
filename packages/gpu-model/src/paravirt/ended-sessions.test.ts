// Proves the memory of sessions the pair ended is bounded (the oldest go first) and that a
// backend remembers only reaped and operator-closed sessions, not those their guest closed.
import { describe, expect, it } from "vitest";
import { Backend } from "./backend.js";
import { EndedSessions } from "./ended-sessions.js";

describe("EndedSessions", () => {
  it("keeps the newest `keep` ends, forgetting the oldest first", () => {
    const ended = new EndedSessions(2);
    ended.add("a", { tenant: "t", reason: "idle" });
    ended.add("b", { tenant: "t", reason: "operator" });
    ended.add("c", { tenant: "u", reason: "idle" });
    expect(ended.size).toBe(2);
    expect(ended.get("a")).toBeUndefined();
    expect(ended.get("b")).toEqual({ tenant: "t", reason: "operator" });
    expect(ended.get("c")).toEqual({ tenant: "u", reason: "idle" });
  });

  it("a backend remembers idle and operator closes, not a guest's Close", () => {
    const backend = new Backend({
      device: { seed: 1, vramBytes: 1 << 20, maxBoBytes: 1 << 16, maxKernelWork: 1 << 10 },
      tenants: new Map([["t", { vramBytes: 1 << 20, bos: 8, contexts: 8 }]]),
      session: { replyCacheFrames: 16, replyCacheBytes: 1 << 16 },
      maxDmaBytes: 1 << 16,
      maxStoresPerBatch: 16,
      trackMmio: false,
    });
    for (const id of ["g", "i", "o"]) backend.openSession(id, "t");
    backend.closeSession("g");
    backend.closeSession("i", "idle");
    backend.closeSession("o", "operator");
    expect(backend.sessions.size).toBe(0);
    expect(backend.ended.get("g")).toBeUndefined();
    expect(backend.ended.get("i")).toEqual({ tenant: "t", reason: "idle" });
    expect(backend.ended.get("o")).toEqual({ tenant: "t", reason: "operator" });
  });
});
