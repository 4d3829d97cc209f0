// Proves release() asks the release watermark once for all streams (not once per stream) and
// still sends each stream exactly its held replies up to it, in order; a later release with a
// higher watermark sends the rest.
import { describe, expect, it } from "vitest";
import { ackedFrames, opened, send, world } from "../testing/guest-sessions-world.js";
import { creates } from "../testing/guest-wire.js";

describe("GuestSessions.release", () => {
  it("reads the watermark once and releases every stream up to it", () => {
    let reads = 0;
    let watermark: number | undefined;
    const w = world({
      replicatedSeq: () => {
        reads++;
        return watermark;
      },
    });
    const streams = ["a", "b", "c", "d", "e", "f"];
    // Each stream: a session (released at once) and 3 context creates, held.
    const seqs = new Map<string, number[]>();
    for (const s of streams) {
      watermark = undefined;
      opened(w, s);
      watermark = -1;
      const before = w.sequencer.log.lastSeq;
      send(w, s, creates(1, 3));
      seqs.set(s, [before + 1, before + 2, before + 3]);
    }
    w.take();
    // Up to the second create of stream "c": a, b fully; c two of three; none of d, e, f.
    watermark = seqs.get("c")![1]!;
    reads = 0;
    w.machine.release();
    expect(reads).toBe(1);
    const first = w.take();
    expect(ackedFrames(first, "a")).toEqual([1, 2, 3]);
    expect(ackedFrames(first, "b")).toEqual([1, 2, 3]);
    expect(ackedFrames(first, "c")).toEqual([1, 2]);
    for (const s of ["d", "e", "f"]) expect(ackedFrames(first, s)).toEqual([]);
    watermark = undefined; // everything
    reads = 0;
    w.machine.release();
    expect(reads).toBe(1);
    const rest = w.take();
    expect(ackedFrames(rest, "a")).toEqual([]);
    expect(ackedFrames(rest, "c")).toEqual([3]);
    for (const s of ["d", "e", "f"]) expect(ackedFrames(rest, s)).toEqual([1, 2, 3]);
  });
});
