// Proves the guest sessions machine's rules on a real backend and sequencer, streams being plain
// tokens and time an input (testing/guest-sessions-world.ts): opens, resumes and closes; replies
// held until the release watermark reaches their entry and released in order; the frames limit
// refused in its turn. guest-sessions-role.test.ts proves the rest.
import { ErrorCode } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import {
  ackedFrames,
  ended,
  errorOf,
  opened,
  replies,
  send,
  serveAll,
  world,
} from "../testing/guest-sessions-world.js";
import { closeMsg, creates, framesMsg, openMsg, undecodableMsg } from "../testing/guest-wire.js";
import { SessionAdmission } from "./session-admission.js";

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
