// Proves the reply cache's eviction by frame number (reply-cache.ts) keeps exactly the replies
// the previous Map-FIFO eviction kept (the same frames in the same order, the newest always
// kept) for random runs of frames, reply sizes and frame and byte limits, including a reply
// above the byte limit.
import { type CallResult, ErrorCode } from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type SessionLimits, SessionRecord } from "./session-table.js";

/** The previous eviction, verbatim: the oldest found by iterating the Map from its start. */
class PreviousCache {
  readonly replies = new Map<number, CallResult>();
  private replyBytes = 0;

  remember(frame: number, result: CallResult, limits: SessionLimits): void {
    this.replies.set(frame, result);
    this.replyBytes += size(result);
    for (const [oldFrame, old] of this.replies) {
      const within =
        this.replies.size <= limits.replyCacheFrames && this.replyBytes <= limits.replyCacheBytes;
      if (within || oldFrame === frame) break;
      this.replies.delete(oldFrame);
      this.replyBytes -= size(old);
    }
  }
}

const size = (r: CallResult) => (r.output.kind === "data" ? r.output.data.byteLength : 0);

const reply = (bytes: number | null): CallResult => ({
  code: ErrorCode.OK,
  message: "",
  output: bytes === null ? { kind: "none" } : { kind: "data", data: new Uint8Array(bytes) },
});

const runArb = fc.record({
  limits: fc.record({
    replyCacheFrames: fc.integer({ min: 1, max: 40 }),
    replyCacheBytes: fc.integer({ min: 0, max: 400 }),
  }),
  replies: fc.array(fc.option(fc.nat({ max: 120 }), { nil: null }), { maxLength: 300 }),
  firstFrame: fc.integer({ min: 1, max: 2 ** 40 }),
});

describe("SessionRecord reply cache", () => {
  it("keeps the same replies, in the same order, as the Map-FIFO eviction it replaced", () => {
    fc.assert(
      fc.property(runArb, ({ limits, replies, firstFrame }) => {
        const session = new SessionRecord("s", "t");
        const previous = new PreviousCache();
        replies.forEach((bytes, i) => {
          const result = reply(bytes);
          session.remember(firstFrame + i, result, limits);
          previous.remember(firstFrame + i, result, limits);
          expect([...session.replies.keys()]).toEqual([...previous.replies.keys()]);
          expect(session.replies.get(firstFrame + i)).toBe(result);
        });
      }),
    );
  });

  it("keeps frames that arrive with gaps (a restored snapshot) oldest first", () => {
    const session = new SessionRecord("s", "t");
    const limits = { replyCacheFrames: 3, replyCacheBytes: 1000 };
    for (const frame of [5, 9, 1000, 2 ** 40, 2 ** 40 + 1]) {
      session.remember(frame, reply(null), limits);
    }
    expect([...session.replies.keys()]).toEqual([1000, 2 ** 40, 2 ** 40 + 1]);
  });

  it("replaces a frame remembered twice without counting its bytes twice", () => {
    const session = new SessionRecord("s", "t");
    const limits = { replyCacheFrames: 10, replyCacheBytes: 100 };
    session.remember(1, reply(60), limits);
    session.remember(2, reply(10), limits);
    session.remember(1, reply(60), limits);
    session.remember(3, reply(30), limits);
    expect([...session.replies.keys()]).toEqual([1, 2, 3]);
    session.remember(4, reply(1), limits);
    expect([...session.replies.keys()]).toEqual([2, 3, 4]);
  });
});
