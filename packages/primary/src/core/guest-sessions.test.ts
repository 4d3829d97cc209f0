// Proves the guest sessions machine's rules on a real backend and sequencer, streams being plain
// tokens and time an input: opens, resumes and closes; replies held until the release watermark
// reaches their entry and released in order; the frames limit refused in its turn; a node that
// does not serve answering NOT_PRIMARY with the redirect; back-pressure as pause/resume actions;
// sessions ended by the node; and (fast-check) whatever the watermark does, every stream's
// replies leave in frame order, none before its entry is replicated, each frame exactly once.
import { ErrorCode, type GuestMessage, ReplicationLog } from "@vgpu-ha/common/core";
import { Backend, type BackendOptions } from "@vgpu-ha/gpu-model";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  closeMsg,
  creates,
  decodeFrame,
  framesMsg,
  openMsg,
  undecodableMsg,
} from "../testing/guest-wire.js";
import type { GuestAction, GuestReply, GuestSessionsOptions } from "./guest-session-types.js";
import { GuestSessions, QUEUE_PAUSE, QUEUE_RESUME } from "./guest-sessions.js";
import { IdleSessions } from "./idle-sessions.js";
import { Sequencer } from "./sequencer.js";
import { SessionAdmission } from "./session-admission.js";

const BACKEND: BackendOptions = {
  device: { seed: 5, vramBytes: 16 << 20, maxBoBytes: 1 << 20, maxKernelWork: 1 << 20 },
  tenants: new Map([
    ["a", { vramBytes: 4 << 20, bos: 64, contexts: 8 }],
    ["b", { vramBytes: 4 << 20, bos: 64, contexts: 8 }],
  ]),
  session: { replyCacheFrames: 1024, replyCacheBytes: 1 << 22 },
  maxDmaBytes: 1 << 20,
  maxStoresPerBatch: 64,
  trackMmio: true,
};

/** A stream is any token; these tests name them. */
type S = string;

interface World {
  readonly machine: GuestSessions<S>;
  readonly sequencer: Sequencer;
  readonly idle: IdleSessions;
  /** The release watermark replicatedSeq() answers. */
  watermark: number | undefined;
  serving: boolean;
  nowMs: number;
  /** Every action so far, in order. */
  readonly log: GuestAction<S>[];
  /** Takes the machine's actions into `log`; returns those. */
  take(): GuestAction<S>[];
}

function world(options: Partial<GuestSessionsOptions<S>> = {}): World {
  const backend = new Backend(BACKEND);
  const sequencer = new Sequencer(
    backend,
    new ReplicationLog(),
    { mmio: "per-page", flushBytes: 1 << 20 },
    () => 0,
  );
  const idle = new IdleSessions(1000);
  let next = 1;
  const w: World = {
    sequencer,
    idle,
    watermark: undefined,
    serving: true,
    nowMs: 0,
    log: [],
    machine: new GuestSessions<S>({
      sequencer,
      idle,
      nodeId: "n1",
      epoch: () => 3,
      serving: () => w.serving,
      replicatedSeq: () => w.watermark,
      redirect: () => "peer:7000",
      maxFramesInFlight: 8,
      maxMessageBytes: 1 << 20,
      newSessionId: () => `s${next++}`,
      checkOpen: (_s, open) =>
        open.token === "good" ? undefined : { code: ErrorCode.UNAUTHENTICATED, message: "no" },
      nowMs: () => w.nowMs,
      decodeFrame,
      ...options,
    }),
    take() {
      const out = w.machine.takeActions();
      w.log.push(...out);
      return out;
    },
  };
  return w;
}

/** Serves everything the stream has queued, a slice at a time, then flushes. */
function serveAll(w: World, s: S): void {
  while (w.machine.hasWork(s)) {
    for (;;) {
      const r = w.machine.serveOne(s);
      if (r.kind !== "frame" || !r.more) break;
    }
    w.machine.flush(s);
    w.machine.afterSlice(s);
  }
}

/** Attaches `s`, receives `messages` and serves them. */
function send(w: World, s: S, ...messages: GuestMessage[]): GuestAction<S>[] {
  if (!w.machine.has(s)) w.machine.attach(s);
  for (const m of messages) w.machine.receive(s, m);
  serveAll(w, s);
  return w.take();
}

const replies = (actions: readonly GuestAction<S>[], s?: S): GuestReply[] =>
  actions.flatMap((a) =>
    a.kind === "reply" && (s === undefined || a.stream === s) ? [a.reply] : [],
  );
const errorOf = (actions: readonly GuestAction<S>[]) =>
  replies(actions).find((r): r is GuestReply & { kind: "error" } => r.kind === "error");
const ackedFrames = (actions: readonly GuestAction<S>[], s?: S) =>
  replies(actions, s).flatMap((r) => (r.kind === "acks" ? r.results.map((x) => x.number) : []));
const ended = (actions: readonly GuestAction<S>[], s: S) =>
  actions.some((a) => a.kind === "end" && a.stream === s);

/** Opens a session on `s`, released at once; its id. */
function opened(w: World, s: S, tenant = "a"): string {
  const saved = w.watermark;
  w.watermark = undefined;
  const r = replies(send(w, s, openMsg(tenant)))[0];
  w.watermark = saved;
  if (r?.kind !== "opened") throw new Error(`no Opened: ${JSON.stringify(r)}`);
  return r.sessionId;
}

describe("GuestSessions: open, resume, close", () => {
  it("holds Opened until the session-open entry is replicated, then releases it once", () => {
    const w = world();
    w.watermark = -1;
    expect(replies(send(w, "x", openMsg()))).toEqual([]);
    const seq = w.sequencer.log.lastSeq;
    w.watermark = seq - 1;
    w.machine.release();
    expect(replies(w.take())).toEqual([]);
    w.watermark = seq;
    w.machine.release();
    const out = w.take();
    expect(replies(out)).toEqual([
      { kind: "opened", sessionId: "s1", epoch: 3, lastFrame: 0, nodeId: "n1" },
    ]);
    const reply = out.find((a) => a.kind === "reply");
    expect(reply?.kind === "reply" && reply.released).toEqual([{ sessionId: "s1", frame: 0, seq }]);
    expect(w.machine.releasedSeq).toBe(seq);
    w.machine.release();
    expect(replies(w.take())).toEqual([]);
    expect(w.machine.applied.sessions).toBe(1);
    expect(w.machine.openStreams).toBe(1);
  });

  it("refuses credentials the driver's check refuses, before any session exists", () => {
    const w = world();
    const out = send(w, "x", openMsg("a", "", "bad"));
    expect(errorOf(out)).toMatchObject({ code: ErrorCode.UNAUTHENTICATED });
    expect(ended(out, "x")).toBe(true);
    expect(w.sequencer.backend.sessions.size).toBe(0);
    expect(w.machine.has("x")).toBe(false);
  });

  it("answers frames before the Open, and a second Open, MALFORMED", () => {
    const w = world();
    expect(errorOf(send(w, "x", creates(1, 1)))).toMatchObject({
      code: ErrorCode.MALFORMED,
      message: "open the session first",
    });
    opened(w, "y");
    expect(errorOf(send(w, "y", openMsg()))).toMatchObject({ code: ErrorCode.MALFORMED });
  });

  it("resumes a session with its last frame; the older stream is told UNKNOWN_SESSION", () => {
    const w = world();
    const id = opened(w, "x");
    send(w, "x", creates(1, 3));
    const out = send(w, "y", openMsg("a", id));
    expect(replies(out, "y")).toEqual([
      { kind: "opened", sessionId: id, epoch: 3, lastFrame: 3, nodeId: "n1" },
    ]);
    expect(replies(out, "x")).toMatchObject([{ kind: "error", code: ErrorCode.UNKNOWN_SESSION }]);
    expect(ended(out, "x")).toBe(true);
    expect(out.some((a) => a.kind === "session" && a.event === "resumed")).toBe(true);
    expect(w.machine.applied.sessions).toBe(1);
  });

  it("a resume waits for a pending MMIO batch (the next entry) before Opened leaves", () => {
    const w = world();
    const id = opened(w, "x");
    send(w, "x", creates(1, 1));
    const bo = send(
      w,
      "x",
      framesMsg(2, [{ call: { op: "boAlloc", context: 1, sizeBytes: 4096 } }]),
    );
    expect(ackedFrames(bo)).toEqual([2]);
    send(w, "x", framesMsg(3, [{ call: { op: "boMap", context: 1, bo: 1 } }]));
    w.watermark = w.sequencer.log.lastSeq;
    const stores = {
      context: 1,
      bo: 1,
      offsets: [0],
      widths: new Uint8Array([1]),
      data: new Uint8Array([7]),
    };
    send(w, "x", framesMsg(4, [{ stores }]));
    expect(w.sequencer.mmioPending).toBe(true);
    expect(replies(send(w, "y", openMsg("a", id)), "y")).toEqual([]);
    w.sequencer.flushMmio();
    w.watermark = w.sequencer.log.lastSeq;
    w.machine.release();
    expect(replies(w.take(), "y")).toMatchObject([{ kind: "opened", lastFrame: 4 }]);
  });

  it("answers UNKNOWN_SESSION for a session never seen or another tenant's, SESSION_EXPIRED for one ended", () => {
    const w = world();
    const id = opened(w, "x", "a");
    expect(errorOf(send(w, "y", openMsg("a", "nope")))).toMatchObject({
      code: ErrorCode.UNKNOWN_SESSION,
    });
    expect(errorOf(send(w, "z", openMsg("b", id)))).toMatchObject({
      code: ErrorCode.UNKNOWN_SESSION,
    });
    expect(w.machine.endSession(id, "operator")).toMatchObject({ tenant: "a" });
    w.take();
    expect(errorOf(send(w, "v", openMsg("a", id)))).toMatchObject({
      code: ErrorCode.SESSION_EXPIRED,
    });
  });

  it("sends Closed only after the held replies and the close entry, then ends the stream", () => {
    const w = world();
    const id = opened(w, "x");
    w.watermark = -1;
    send(w, "x", creates(1, 2));
    const out = send(w, "x", closeMsg());
    expect(replies(out)).toEqual([]);
    expect(w.sequencer.backend.sessions.has(id)).toBe(false);
    w.watermark = w.sequencer.log.lastSeq;
    w.machine.release();
    const done = w.take();
    expect(replies(done).map((r) => r.kind)).toEqual(["acks", "closed"]);
    expect(ended(done, "x")).toBe(true);
    expect(w.machine.has("x")).toBe(false);
  });

  it("answers a message after Close MALFORMED", () => {
    const w = world();
    opened(w, "x");
    w.watermark = -1;
    const out = send(w, "x", closeMsg(), creates(1, 1));
    expect(errorOf(out)).toMatchObject({
      code: ErrorCode.MALFORMED,
      message: "message after Close",
    });
  });

  it("refuses an open over the tenant's rate later, and over the count at once", () => {
    let now = 0;
    const admission = new SessionAdmission(
      { maxSessionsPerTenant: 2, maxSessionsTotal: 10, opensPerSecond: 1, openBurst: 1 },
      () => now,
    );
    const w = world({ admission });
    opened(w, "x");
    const later = send(w, "y", openMsg());
    const action = later.find((a) => a.kind === "refuse-later");
    expect(action).toMatchObject({ stream: "y", refusal: { code: ErrorCode.LIMIT_EXCEEDED } });
    expect(action?.kind === "refuse-later" && action.waitMs).toBeGreaterThan(0);
    expect(w.machine.has("y")).toBe(false);
    now = 2000;
    opened(w, "z");
    const full = send(w, "v", openMsg());
    expect(errorOf(full)).toMatchObject({ code: ErrorCode.LIMIT_EXCEEDED });
  });
});

describe("GuestSessions: frames and their replies", () => {
  it("holds each reply until its entry is replicated and releases them in order", () => {
    const w = world();
    opened(w, "x");
    w.watermark = w.sequencer.log.lastSeq;
    expect(ackedFrames(send(w, "x", creates(1, 4)))).toEqual([]);
    expect(w.machine.heldReplies).toBe(4);
    w.watermark += 2;
    w.machine.release();
    const first = w.take();
    expect(ackedFrames(first)).toEqual([1, 2]);
    expect(replies(first)[0]).toMatchObject({ kind: "acks", epoch: 3, ackedThrough: 2 });
    w.watermark = undefined;
    w.machine.release();
    expect(ackedFrames(w.take())).toEqual([3, 4]);
    expect(w.machine.heldReplies).toBe(0);
    expect(w.machine.ackedSeq).toBe(w.sequencer.log.lastSeq);
    expect(w.machine.applied).toMatchObject({ frames: 4, acknowledged: 4 });
  });

  it("answers a re-sent frame from the reply cache without applying it again", () => {
    const w = world();
    opened(w, "x");
    send(w, "x", creates(1, 2));
    const again = send(w, "x", creates(1, 2));
    expect(ackedFrames(again)).toEqual([1, 2]);
    expect(w.machine.applied.frames).toBe(2);
  });

  it("counts a frame that does not decode as a refused MALFORMED reply that waits for nothing", () => {
    const w = world();
    opened(w, "x");
    w.watermark = 0;
    w.machine.receive("x", undecodableMsg());
    const r = w.machine.serveOne("x");
    expect(r).toMatchObject({ kind: "frame", malformed: true, refused: true, more: false });
    w.machine.flush("x");
    const out = w.take();
    expect(ackedFrames(out)).toEqual([1]);
    const acks = replies(out)[0];
    expect(acks?.kind === "acks" && acks.results[0]?.result.code).toBe(ErrorCode.MALFORMED);
  });

  it("refuses the Frames message that passes the frames limit in its turn, after earlier ones", () => {
    const w = world();
    opened(w, "x");
    w.watermark = -1;
    w.machine.receive("x", creates(1, 5));
    w.machine.receive("x", creates(6, 4));
    serveAll(w, "x");
    const out = w.take();
    expect(errorOf(out)).toMatchObject({
      code: ErrorCode.LIMIT_EXCEEDED,
      message: "9 frames unanswered, limit 8",
    });
    expect(w.sequencer.backend.sessions.get("s1")?.lastFrame).toBe(5);
    expect(ended(out, "x")).toBe(true);
  });

  it("skips an empty Frames message: nothing to apply, nothing to answer", () => {
    const w = world();
    opened(w, "x");
    const out = send(w, "x", creates(1, 0), creates(1, 1));
    expect(ackedFrames(out)).toEqual([1]);
    expect(errorOf(out)).toBeUndefined();
  });

  it("serves a Frames message one frame at a time and says when it has more", () => {
    const w = world();
    opened(w, "x");
    w.machine.receive("x", creates(1, 3));
    expect(w.machine.serveOne("x")).toMatchObject({
      kind: "frame",
      more: true,
      op: "contextCreate",
    });
    expect(w.machine.serveOne("x")).toMatchObject({ more: true });
    expect(w.machine.serveOne("x")).toMatchObject({ more: false, outcome: "applied" });
    expect(w.machine.hasWork("x")).toBe(false);
    expect(w.machine.tenantOf("x")).toBe("a");
  });

  it("splits replies so that no Acks exceeds half the message limit", () => {
    const w = world({ maxMessageBytes: 64 * 4 });
    opened(w, "x");
    const acks = replies(send(w, "x", creates(1, 5))).filter((r) => r.kind === "acks");
    expect(acks.map((r) => (r.kind === "acks" ? r.results.length : 0))).toEqual([2, 2, 1]);
    expect(acks.map((r) => (r.kind === "acks" ? r.ackedThrough : 0))).toEqual([2, 4, 5]);
  });
});

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
