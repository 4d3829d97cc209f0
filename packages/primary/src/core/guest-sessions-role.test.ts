// Proves the guest sessions machine's dealings with the role and the node
// (testing/guest-sessions-world.ts): a node that does not serve answers NOT_PRIMARY with the
// redirect; the role's end ends every stream; back-pressure as pause/resume actions; half-close;
// sessions ended by the node (idle, operator); and (fast-check) whatever the watermark does,
// every stream's replies leave in frame order, none before its entry is replicated, each once.
import { ErrorCode } from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ackedFrames,
  ended,
  errorOf,
  opened,
  replies,
  type S,
  send,
  serveAll,
  world,
} from "../testing/guest-sessions-world.js";
import { creates } from "../testing/guest-wire.js";
import type { GuestAction } from "./guest-session-types.js";
import { QUEUE_PAUSE, QUEUE_RESUME } from "./guest-sessions.js";

describe("GuestSessions: the role and the node", () => {
  it("answers NOT_PRIMARY with the redirect when the node does not serve", () => {
    const w = world();
    opened(w, "x");
    w.serving = false;
    const out = send(w, "x", creates(1, 1));
    expect(errorOf(out)).toEqual({
      kind: "error",
      code: ErrorCode.NOT_PRIMARY,
      message: "this node does not serve guests now",
      redirect: "peer:7000",
    });
    expect(w.machine.applied.frames).toBe(0);
  });

  it("ends every stream with NOT_PRIMARY and drops what it held when the role ends", () => {
    const w = world();
    opened(w, "x");
    opened(w, "y", "b");
    w.watermark = -1;
    send(w, "x", creates(1, 2));
    w.machine.endAll("stepping down");
    const out = w.take();
    for (const s of ["x", "y"]) {
      expect(replies(out, s)).toEqual([
        {
          kind: "error",
          code: ErrorCode.NOT_PRIMARY,
          message: "stepping down",
          redirect: "peer:7000",
        },
      ]);
      expect(ended(out, s)).toBe(true);
    }
    expect(w.machine.heldReplies).toBe(0);
    expect(w.machine.openStreams).toBe(0);
    w.watermark = undefined;
    w.machine.release();
    expect(w.take()).toEqual([]);
  });

  it("pauses every stream under back-pressure and resumes them after", () => {
    const w = world();
    w.machine.attach("x");
    w.machine.attach("y");
    w.take();
    w.machine.setPaused(true);
    expect(w.take()).toEqual([
      { kind: "pause", stream: "x" },
      { kind: "pause", stream: "y" },
    ]);
    expect(w.machine.isPaused).toBe(true);
    w.machine.setPaused(true);
    expect(w.take()).toEqual([]);
    w.machine.setPaused(false);
    expect(w.take().map((a) => a.kind)).toEqual(["resume", "resume"]);
  });

  it("stops reading a stream past QUEUE_PAUSE queued messages, reads it again at QUEUE_RESUME", () => {
    const w = world({ maxFramesInFlight: 1000 });
    opened(w, "x");
    for (let i = 0; i <= QUEUE_PAUSE; i++) w.machine.receive("x", creates(i + 1, 1));
    w.machine.flow("x");
    expect(w.take()).toEqual([{ kind: "pause", stream: "x" }]);
    let queued = QUEUE_PAUSE + 1;
    let resumedAt: number | undefined;
    while (w.machine.hasWork("x")) {
      w.machine.serveOne("x");
      queued--;
      w.machine.flow("x");
      const flows = w.take().filter((a) => a.kind === "pause" || a.kind === "resume");
      if (resumedAt === undefined && flows.length > 0) {
        expect(flows).toEqual([{ kind: "resume", stream: "x" }]);
        resumedAt = queued;
      }
    }
    expect(resumedAt).toBe(QUEUE_RESUME);
  });

  it("ends a half-closed stream once what it sent is served", () => {
    const w = world();
    opened(w, "x");
    w.machine.receive("x", creates(1, 2));
    w.machine.guestEnded("x");
    expect(w.take()).toEqual([]);
    serveAll(w, "x");
    const out = w.take();
    expect(ackedFrames(out)).toEqual([1, 2]);
    expect(out.at(-1)).toEqual({ kind: "end", stream: "x" });
    expect(w.machine.has("x")).toBe(false);
  });

  it("starts a session's idle time when its stream goes, and reaps it through the log", () => {
    const w = world();
    const id = opened(w, "x");
    w.nowMs = 100;
    w.machine.gone("x");
    expect(w.machine.has("x")).toBe(false);
    expect(w.idle.activity(id)).toMatchObject({ attached: false, idleSinceMs: 100 });
    w.nowMs = 600;
    expect(w.machine.reapIdle(10)).toEqual([]);
    w.nowMs = 1200;
    const seq = w.sequencer.log.lastSeq;
    expect(w.machine.reapIdle(10)).toEqual([{ id, tenant: "a" }]);
    expect(w.sequencer.log.lastSeq).toBe(seq + 1);
    expect(w.sequencer.backend.sessions.has(id)).toBe(false);
  });

  it("tells an attached stream SESSION_EXPIRED when an operator ends its session", () => {
    const w = world();
    const id = opened(w, "x");
    w.watermark = -1;
    send(w, "x", creates(1, 1));
    expect(w.machine.endSession(id, "operator")).toMatchObject({ tenant: "a" });
    const out = w.take();
    expect(errorOf(out)).toMatchObject({ code: ErrorCode.SESSION_EXPIRED });
    expect(ackedFrames(out)).toEqual([]);
    expect(w.machine.endSession("nope", "operator")).toBeUndefined();
  });

  it("reaps nothing while the node does not serve", () => {
    const w = world();
    const id = opened(w, "x");
    w.machine.gone("x");
    w.nowMs = 5000;
    w.serving = false;
    expect(w.machine.reapIdle(10)).toEqual([]);
    expect(w.sequencer.backend.sessions.has(id)).toBe(true);
  });
});

describe("GuestSessions: release order (property)", () => {
  /** One step: a stream sends n frames, or the watermark moves by d (or to all). */
  const step = fc.oneof(
    fc.record({
      kind: fc.constant("send" as const),
      stream: fc.integer({ min: 0, max: 2 }),
      n: fc.integer({ min: 1, max: 3 }),
    }),
    fc.record({ kind: fc.constant("advance" as const), by: fc.integer({ min: 0, max: 4 }) }),
  );

  it("releases each stream's replies in frame order, never early, each frame once", () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 40 }), (steps) => {
        const w = world({ maxFramesInFlight: 1 << 20 });
        const streams = ["x", "y", "z"];
        const next = new Map<S, number>();
        for (const [i, s] of streams.entries()) {
          opened(w, s, i % 2 === 0 ? "a" : "b");
          next.set(s, 1);
        }
        w.watermark = w.sequencer.log.lastSeq;
        const seen = new Map<S, number[]>();
        const check = (actions: readonly GuestAction<S>[]) => {
          for (const a of actions) {
            if (a.kind !== "reply" || a.reply.kind !== "acks") continue;
            for (const r of a.released) expect(r.seq).toBeLessThanOrEqual(w.watermark ?? Infinity);
            seen.set(a.stream, [
              ...(seen.get(a.stream) ?? []),
              ...a.reply.results.map((x) => x.number),
            ]);
          }
        };
        for (const st of steps) {
          if (st.kind === "send") {
            const s = streams[st.stream]!;
            const first = next.get(s)!;
            next.set(s, first + st.n);
            check(send(w, s, creates(first, st.n)));
          } else {
            w.watermark = Math.min(w.sequencer.log.lastSeq, (w.watermark ?? 0) + st.by);
            w.machine.release();
            check(w.take());
          }
        }
        w.watermark = undefined;
        w.machine.release();
        check(w.take());
        for (const s of streams) {
          const sent = next.get(s)! - 1;
          expect(seen.get(s) ?? []).toEqual(Array.from({ length: sent }, (_, i) => i + 1));
        }
        expect(w.machine.heldReplies).toBe(0);
      }),
      { numRuns: 150 },
    );
  });
});
