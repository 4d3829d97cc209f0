// Proves the resync figures (percent, average rate, ETA) from bytes done and elapsed time,
// including the edges: nothing acknowledged yet, an empty snapshot, and done past the total.
import { describe, expect, it } from "vitest";
import { resyncProgress } from "./resync-progress.js";

describe("resyncProgress", () => {
  it("gives percent, average rate and the time left at that rate", () => {
    const p = resyncProgress({ totalBytes: 1000, doneBytes: 250, startedMs: 1000 }, 3500);
    expect(p).toEqual({
      totalBytes: 1000,
      doneBytes: 250,
      percent: 25,
      rateBytesPerSecond: 100,
      etaSeconds: 8,
      elapsedSeconds: 2.5,
    });
  });

  it("has no ETA before the standby acknowledged anything", () => {
    const p = resyncProgress({ totalBytes: 1 << 20, doneBytes: 0, startedMs: 0 }, 500);
    expect(p.rateBytesPerSecond).toBe(0);
    expect(p.etaSeconds).toBeNull();
    expect(p.percent).toBe(0);
  });

  it("calls an empty snapshot complete", () => {
    const p = resyncProgress({ totalBytes: 0, doneBytes: 0, startedMs: 0 }, 0);
    expect(p.percent).toBe(100);
    expect(p.etaSeconds).toBe(0);
  });

  it("never reports more done than the total, and rounds percent down", () => {
    expect(resyncProgress({ totalBytes: 3, doneBytes: 5, startedMs: 0 }, 1000).percent).toBe(100);
    expect(resyncProgress({ totalBytes: 3, doneBytes: 2, startedMs: 0 }, 1000).percent).toBe(66.6);
  });
});
