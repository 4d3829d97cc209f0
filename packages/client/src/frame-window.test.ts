// Proves the client's frame window: numbering continues from the last applied frame, sending
// respects the in-flight bound, results settle in order, and rewind re-sends what is unsettled;
// a frame added without a promise reports to its callback; settled() waits for what was pushed.

import { ErrorCode } from "@vgpu-ha/common";
import { describe, expect, it } from "vitest";
import { FrameWindow } from "./frame-window.js";

const ok = { code: ErrorCode.OK, message: "", output: { kind: "none" as const } };
const fence = { kind: "call" as const, call: { op: "fence" as const, context: 1 } };

describe("frame window", () => {
  it("numbers frames after the last applied one and settles them in order", async () => {
    const w = new FrameWindow(41);
    const results = [w.push(fence), w.push(fence), w.push(fence)];
    expect(w.takeUnsent(2).map((f) => f.number)).toEqual([42, 43]);
    expect(w.inFlight).toBe(2);
    w.settle(42, ok);
    expect(w.inFlight).toBe(1);
    expect(w.takeUnsent(10).map((f) => f.number)).toEqual([44]);
    w.settle(43, ok);
    w.settle(44, ok);
    expect(await Promise.all(results)).toEqual([ok, ok, ok]);
    expect(w.size).toBe(0);
  });

  it("ignores results that are not for its oldest frame", () => {
    const w = new FrameWindow(0);
    void w.push(fence);
    w.takeUnsent(1);
    w.settle(7, ok);
    expect(w.size).toBe(1);
  });

  it("re-sends every unsettled frame after a rewind", () => {
    const w = new FrameWindow(0);
    for (let i = 0; i < 3; i++) void w.push(fence);
    w.takeUnsent(3);
    w.settle(1, ok);
    w.rewind();
    expect(w.takeUnsent(10).map((f) => f.number)).toEqual([2, 3]);
  });

  it("stays correct across compaction of a long run", async () => {
    const w = new FrameWindow(0);
    for (let i = 1; i <= 5000; i++) {
      const p = w.push(fence);
      expect(w.takeUnsent(1)[0]?.number).toBe(i);
      w.settle(i, ok);
      await p;
    }
    expect(w.size).toBe(0);
  });

  it("rejects every pending frame on failure", async () => {
    const w = new FrameWindow(0);
    const p = w.push(fence);
    w.failAll(new Error("gone"));
    await expect(p).rejects.toThrow("gone");
  });

  it("stops a message at its byte budget, but always takes one frame", () => {
    const w = new FrameWindow(0);
    for (let i = 0; i < 5; i++) void w.push(fence);
    const size = () => 40;
    expect(w.takeUnsent(10, 100, size).map((f) => f.number)).toEqual([1, 2]);
    expect(w.takeUnsent(10, 10, size).map((f) => f.number)).toEqual([3]);
    expect(w.takeUnsent(10, 1000, size).map((f) => f.number)).toEqual([4, 5]);
  });

  it("reports a frame added without a promise to its callback, a failure included", () => {
    const w = new FrameWindow(9);
    const seen: unknown[] = [];
    expect(w.add(fence, (o) => seen.push(o))).toBe(10);
    expect(w.add(fence, (o) => seen.push(o))).toBe(11);
    w.settle(10, ok);
    expect(seen).toEqual([ok]);
    const error = new Error("gone");
    w.failAll(error);
    expect(seen).toEqual([ok, error]);
  });

  it("settled() waits for the frames pushed before it, not for later ones", async () => {
    const w = new FrameWindow(0);
    await w.settled(); // nothing pushed: at once
    w.add(fence);
    let done = false;
    const waiting = w.settled().then(() => {
      done = true;
    });
    w.add(fence);
    w.settle(1, ok);
    await waiting;
    expect(done).toBe(true);
    expect(w.size).toBe(1);
    const rest = w.settled();
    w.failAll(new Error("closed"));
    await rest;
  });
});
