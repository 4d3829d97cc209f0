// The guest sessions of a primary as a pure machine: which stream holds which session, what each
// stream sent and was not served yet, and the replies held until the standby has their entries.
// Inputs in (a stream attached, a message received, a unit of work served, the release watermark
// moved, the role ended), actions out (replies to send, streams to end, pause or resume, refusals
// to send later) — the driver (guest-service.ts) does the I/O, the timing and the fairness.
//
// Rules: a Frames message that would take a stream's unanswered frames (held + queued + its own)
// past maxFramesInFlight is refused with LIMIT_EXCEEDED in its turn, after what came before it;
// a reply goes out only once replicatedSeq() reaches the seq of its entry (undefined: at once,
// -1: never), in order; Opened waits for the session-open entry, Closed for the close entry and
// every reply before it; a resume elsewhere ends the older stream; when the role ends every
// stream is told NOT_PRIMARY with the redirect and held replies are dropped (a failover may lose
// them: they were never promised).
import {
  ErrorCode,
  type GuestMessage,
  type GuestOpen,
  type SessionCloseReason,
} from "@vgpu-ha/common/core";
import type {
  GuestAction,
  GuestReply,
  GuestSessionsOptions,
  Refusal,
  Released,
  Served,
  StreamState,
} from "./guest-session-types.js";
import {
  applyFrame,
  expiredMessage,
  type Held,
  newSession,
  resumedSession,
  type Session,
  splitAcks,
} from "./guest-steps.js";

type EndReason = Exclude<SessionCloseReason, "guest">;

/** Messages queued on one stream past which it is not read; read again at QUEUE_RESUME. */
export const QUEUE_PAUSE = 32;
export const QUEUE_RESUME = 8;

export class GuestSessions<S> {
  private readonly o: GuestSessionsOptions<S>;
  private readonly states = new Map<S, StreamState>();
  /** The live stream of each session; a resume elsewhere ends the older one. */
  private readonly bySession = new Map<string, S>();
  private paused = false;
  private actions: GuestAction<S>[] = [];
  /** Highest seq acknowledged to a guest (status). */
  ackedSeq = 0;
  /** The highest seq any reply (an ack, a session opened or closed) went out for. */
  releasedSeq = 0;
  /** Frames applied, replies sent and sessions opened (for what a primary would discard). */
  readonly applied = { frames: 0, acknowledged: 0, sessions: 0 };

  constructor(options: GuestSessionsOptions<S>) {
    this.o = options;
  }

  /** The actions since the last call, in order. */
  takeActions(): GuestAction<S>[] {
    const out = this.actions;
    this.actions = [];
    return out;
  }

  get openStreams(): number {
    return this.bySession.size;
  }

  get isPaused(): boolean {
    return this.paused;
  }

  get heldReplies(): number {
    let n = 0;
    for (const s of this.states.values()) n += s.held.length;
    return n;
  }

  has(stream: S): boolean {
    return this.states.has(stream);
  }

  /** The fair-queue key of a stream: its tenant, "" before its session is open. */
  tenantOf(stream: S): string {
    return this.states.get(stream)?.session?.tenant ?? "";
  }

  /** Received and not served yet. */
  hasWork(stream: S): boolean {
    return (this.states.get(stream)?.queue.length ?? 0) > 0;
  }

  /** A new stream; it flows unless the node holds guests back. */
  attach(stream: S): void {
    this.states.set(stream, {
      session: undefined,
      opened: undefined,
      held: [],
      closing: undefined,
      queue: [],
      served: 0,
      queuedFrames: 0,
      ended: false,
    });
    this.flow(stream);
  }

  /** Queues a message in arrival order; the frames limit is judged now and refused in turn. */
  receive(stream: S, message: GuestMessage): void {
    const state = this.states.get(stream);
    if (state === undefined) return;
    if (message.kind.case === "frames") {
      const n = message.kind.value.frames.length;
      const unanswered = state.held.length + state.queuedFrames + n;
      const max = this.o.maxFramesInFlight;
      if (unanswered > max) {
        const message = `${unanswered} frames unanswered, limit ${max}`;
        state.queue.push({ kind: "refuse", refusal: { code: ErrorCode.LIMIT_EXCEEDED, message } });
      } else {
        state.queuedFrames += n;
        state.queue.push({ kind: "message", message });
      }
    } else {
      state.queue.push({ kind: "message", message });
    }
  }

  /** The guest half-closed: the stream ends once what it sent is served. */
  guestEnded(stream: S): void {
    const state = this.states.get(stream);
    if (state === undefined) return;
    state.ended = true;
    if (state.queue.length === 0) this.finishEnded(stream);
  }

  /** The stream broke or was cancelled; its session's idle time starts. */
  gone(stream: S): void {
    this.forget(stream);
  }

  /** After a slice: true if the stream has more work; else ends it if the guest half-closed. */
  afterSlice(stream: S): boolean {
    const state = this.states.get(stream);
    if (state === undefined) return false;
    if (state.queue.length > 0) return true;
    if (state.ended) this.finishEnded(stream);
    else this.flow(stream);
    return false;
  }

  /** Stops (or resumes) reading every stream: back-pressure while the standby lags. */
  setPaused(paused: boolean): void {
    if (paused === this.paused) return;
    this.paused = paused;
    for (const s of this.states.keys()) this.flow(s);
  }

  /**
   * Serves one unit of the stream's first queued item: a whole message, a refusal, or one frame
   * of a Frames message (the driver decides how many make a slice, then calls flush).
   */
  serveOne(stream: S): Served {
    const state = this.states.get(stream)!;
    const pending = state.queue[0]!;
    if (pending.kind === "refuse") {
      this.sessionError(stream, pending.refusal.code, pending.refusal.message);
      return { kind: "message" };
    }
    const message = pending.message;
    if (message.kind.case !== "frames") {
      state.queue.shift();
      this.onMessage(stream, state, message);
      return { kind: "message" };
    }
    const frames = message.kind.value.frames;
    const refusal = this.refusalOf(state);
    if (refusal !== undefined || state.session === undefined) {
      const r = refusal ?? { code: ErrorCode.MALFORMED, message: "open the session first" };
      this.sessionError(stream, r.code, r.message, this.redirectFor(r.code));
      return { kind: "message" };
    }
    if (frames.length === 0) {
      state.queue.shift(); // nothing to apply, nothing to answer
      return { kind: "message" };
    }
    const more = state.served + 1 < frames.length;
    const { held, served } = applyFrame(this.o, state.session, frames[state.served]!, more);
    state.held.push(held);
    if (served.outcome === "applied" && !served.malformed) this.applied.frames++;
    state.queuedFrames--;
    state.served++;
    if (!more) {
      state.queue.shift();
      state.served = 0;
    }
    return served;
  }

  /**
   * Sends every held reply whose entry the standby has now applied. The watermark is asked once
   * for all streams (it builds the role's facts and release view: once per stream and ack
   * was ~3 % of a sync primary's CPU with 8 streams); nothing in the loop moves it.
   */
  release(): void {
    const replicated = this.o.replicatedSeq();
    for (const s of [...this.states.keys()]) this.flushUpTo(s, replicated);
  }

  /** Writes the Opened reply and the held results that may go out now, in order. */
  flush(stream: S): void {
    this.flushUpTo(stream, this.o.replicatedSeq());
  }

  /** flush() up to the watermark `replicated` (undefined: everything). */
  private flushUpTo(stream: S, replicated: number | undefined): void {
    const state = this.states.get(stream);
    if (state === undefined) return;
    const ready = (seq: number) => replicated === undefined || seq <= replicated;
    if (state.opened) {
      if (!ready(state.opened.seq)) return;
      const { seq, reply } = state.opened;
      this.releasedSeq = Math.max(this.releasedSeq, seq);
      state.opened = undefined;
      this.reply(stream, reply, [{ sessionId: reply.sessionId, frame: 0, seq }]);
    }
    let n = 0;
    while (n < state.held.length && ready(state.held[n]!.seq)) n++;
    if (n > 0) this.writeAcks(stream, state, state.held.splice(0, n));
    if (state.closing !== undefined && state.held.length === 0 && ready(state.closing)) {
      this.releasedSeq = Math.max(this.releasedSeq, state.closing);
      this.reply(stream, { kind: "closed" }, []);
      this.actions.push({ kind: "end", stream });
      this.states.delete(stream);
    }
  }

  /** Ends every stream with NOT_PRIMARY (shutdown or loss of the role); held replies are dropped. */
  endAll(message: string): void {
    for (const [stream, s] of [...this.states]) {
      s.held.length = 0;
      s.queue.length = 0;
      this.sessionError(stream, ErrorCode.NOT_PRIMARY, message, this.o.redirect());
    }
    this.states.clear();
    this.bySession.clear();
  }

  /**
   * Ends a session its guest did not close (the idle reaper, an operator) through the log; a
   * stream still attached is told SESSION_EXPIRED. The close entry's seq and the session's
   * tenant; undefined for no such session.
   */
  endSession(id: string, reason: EndReason): { seq: number; tenant: string } | undefined {
    const session = this.o.sequencer.backend.sessions.get(id);
    if (session === undefined) return undefined;
    const seq = this.o.sequencer.closeSession(id, reason);
    this.o.idle?.forget(id);
    const stream = this.bySession.get(id);
    const state = stream === undefined ? undefined : this.states.get(stream);
    if (stream !== undefined && state !== undefined) {
      state.held.length = 0;
      this.sessionError(stream, ErrorCode.SESSION_EXPIRED, expiredMessage(reason));
    }
    return { seq, tenant: session.tenant };
  }

  /** Ends up to `max` sessions idle past the idle limit (longest idle first); ids and tenants. */
  reapIdle(max: number): { id: string; tenant: string }[] {
    const idle = this.o.idle;
    if (idle === undefined || idle.idleMs === 0 || !this.o.serving()) return [];
    const due = idle.tick(this.o.sequencer.backend.sessions.keys(), this.o.nowMs(), max);
    const out: { id: string; tenant: string }[] = [];
    for (const id of due) {
      const ended = this.endSession(id, "idle");
      if (ended !== undefined) out.push({ id, tenant: ended.tenant });
    }
    return out;
  }

  /**
   * Pauses a stream whose queue has grown past QUEUE_PAUSE messages (its tenant gets its turns;
   * the rest waits in the transport), or all while the node holds guests back; resumes it once
   * it is down to QUEUE_RESUME. Pausing on every queued message instead cost a pause/resume
   * round per message and cut a single session's call rate by four.
   */
  flow(stream: S): void {
    if (!this.states.has(stream)) return;
    const n = this.states.get(stream)?.queue.length ?? 0;
    if (this.paused || n > QUEUE_PAUSE) this.actions.push({ kind: "pause", stream });
    else if (n <= QUEUE_RESUME) this.actions.push({ kind: "resume", stream });
  }

  private finishEnded(stream: S): void {
    this.forget(stream);
    this.actions.push({ kind: "end", stream });
  }

  private forget(stream: S): void {
    const state = this.states.get(stream);
    if (state === undefined) return;
    this.states.delete(stream);
    state.queue.length = 0;
    state.queuedFrames = 0;
    const id = state.session?.id;
    if (id !== undefined && this.bySession.get(id) === stream) {
      this.bySession.delete(id);
      // Its idle time starts now, unless the session itself is gone.
      if (this.o.sequencer.backend.sessions.has(id)) this.o.idle?.detach(id, this.o.nowMs());
    }
  }

  /** Why nothing a stream sends may be served now: not serving, or after its Close. */
  private refusalOf(state: StreamState): Refusal | undefined {
    if (!this.o.serving()) {
      return { code: ErrorCode.NOT_PRIMARY, message: "this node does not serve guests now" };
    }
    if (state.closing !== undefined)
      return { code: ErrorCode.MALFORMED, message: "message after Close" };
    return undefined;
  }

  private redirectFor(code: ErrorCode): string {
    return code === ErrorCode.NOT_PRIMARY ? this.o.redirect() : "";
  }

  private onMessage(stream: S, state: StreamState, message: GuestMessage): void {
    const refusal = this.refusalOf(state);
    if (refusal !== undefined) {
      this.sessionError(stream, refusal.code, refusal.message, this.redirectFor(refusal.code));
      return;
    }
    const kind = message.kind;
    switch (kind.case) {
      case "open":
        if (state.session !== undefined) {
          this.sessionError(stream, ErrorCode.MALFORMED, "session already open on this stream");
          return;
        }
        this.open(stream, state, kind.value);
        return;
      case "close":
        // Closed follows the replies still held, once the close itself is replicated.
        state.closing = 0;
        if (state.session !== undefined) {
          const { id, tenant } = state.session;
          state.closing = this.o.sequencer.closeSession(id);
          this.bySession.delete(id);
          this.o.idle?.forget(id);
          this.actions.push({ kind: "session", event: "closed", sessionId: id, tenant });
        }
        this.flush(stream);
        return;
      default:
        this.sessionError(stream, ErrorCode.MALFORMED, "empty guest message");
    }
  }

  private open(stream: S, state: StreamState, open: GuestOpen): void {
    const refused = this.o.checkOpen(stream, open);
    if (refused !== undefined) {
      this.sessionError(stream, refused.code, refused.message);
      return;
    }
    const resume = open.resumeSessionId !== "";
    const session = resume ? this.resume(stream, open) : this.create(stream, open);
    if (session === undefined) return;
    const { sequencer } = this.o;
    // A resumed session's frames so far may not all be on the standby yet.
    const seq = sequencer.log.lastSeq + (resume && sequencer.mmioPending ? 1 : 0);
    state.session = session;
    this.bySession.set(session.id, stream);
    if (resume) this.o.idle?.attach(session.id);
    else this.o.idle?.opened(session.id, this.o.nowMs());
    this.actions.push({
      kind: "session",
      event: resume ? "resumed" : "opened",
      sessionId: session.id,
      tenant: session.tenant,
    });
    state.opened = {
      seq,
      reply: {
        kind: "opened",
        sessionId: session.id,
        epoch: this.o.epoch(),
        lastFrame: session.lastFrame,
        nodeId: this.o.nodeId,
      },
    };
    this.flush(stream);
  }

  private resume(stream: S, open: GuestOpen): Session | undefined {
    const step = resumedSession(this.o.sequencer, open);
    if ("refusal" in step) {
      this.sessionError(stream, step.refusal.code, step.refusal.message);
      return undefined;
    }
    const older = this.bySession.get(step.session.id);
    if (older !== undefined && older !== stream) {
      this.sessionError(older, ErrorCode.UNKNOWN_SESSION, "session resumed on another stream");
    }
    return step.session;
  }

  private create(stream: S, open: GuestOpen): Session | undefined {
    const step = newSession(this.o, open);
    if ("session" in step) {
      this.applied.sessions++;
      return step.session;
    }
    const { refusal, waitMs } = step;
    if (waitMs <= 0) {
      this.sessionError(stream, refusal.code, refusal.message);
    } else {
      this.forget(stream);
      this.actions.push({ kind: "refuse-later", stream, refusal, waitMs });
    }
    return undefined;
  }

  /** One or more Acks replies, none above half the message limit. */
  private writeAcks(stream: S, state: StreamState, out: Held[]): void {
    const sessionId = state.session?.id ?? "";
    for (const part of splitAcks(out, this.o.maxMessageBytes / 2)) {
      const last = part.at(-1)!;
      this.applied.acknowledged += part.length;
      if (last.seq > this.ackedSeq) this.ackedSeq = last.seq;
      if (last.seq > this.releasedSeq) this.releasedSeq = last.seq;
      const reply: GuestReply = {
        kind: "acks",
        epoch: this.o.epoch(),
        ackedThrough: last.frame,
        results: part.map((h) => ({ number: h.number, result: h.result })),
      };
      const released = part.map((h) => ({ sessionId, frame: h.number, seq: h.seq }));
      this.reply(stream, reply, released);
    }
  }

  private reply(stream: S, reply: GuestReply, released: readonly Released[]): void {
    this.actions.push({ kind: "reply", stream, reply, released });
  }

  private sessionError(stream: S, code: ErrorCode, message: string, redirect = ""): void {
    this.reply(stream, { kind: "error", code, message, redirect }, []);
    this.actions.push({ kind: "end", stream });
    this.forget(stream);
  }
}
