// The primary's guest service as the simulator runs it: a line-by-line mirror of
// packages/primary/src/guest-service.ts (which is bound to grpc-js streams) over simulated
// streams. Opens or resumes sessions, applies frames through the real Sequencer, holds each
// reply until `replicatedSeq` allows it, pauses reading while back-pressure is on, ends every
// stream with NOT_PRIMARY when the role stops. Differences: session ids are deterministic
// (node, epoch, counter) instead of random UUIDs; frames arrive decoded; no metrics.
import { ErrorCode, type Frame } from "@vgpu-ha/common";
import type { Sequencer } from "@vgpu-ha/primary";
import type { GuestMessage, NodeMessage, ReleaseTag } from "./guest-protocol.js";
import type { End } from "./net.js";
import type { SimProcess } from "./process.js";

type Stream = End<NodeMessage, GuestMessage>;
type Session = NonNullable<ReturnType<Sequencer["backend"]["sessions"]["get"]>>;

/** A reply that went out: its frame (0: the session's Opened) and the seq it waited for. */
export interface Released {
  readonly sessionId: string;
  readonly frame: number;
  readonly seq: number;
}

export interface SimGuestServiceDeps {
  readonly proc: SimProcess;
  readonly sequencer: Sequencer;
  readonly nodeId: string;
  readonly epoch: () => number;
  readonly maxFramesInFlight: number;
  readonly serving: () => boolean;
  readonly replicatedSeq: () => number | undefined;
  readonly afterApply: () => void;
  readonly redirect: () => string;
  readonly newSessionId: () => string;
  /** For the checker: who releases, and what. */
  readonly tag: () => ReleaseTag;
  readonly onRelease: (released: readonly Released[]) => void;
}

interface Held {
  readonly frame: number;
  readonly seq: number;
  readonly number: number;
  readonly result: Parameters<Session["remember"]>[1];
}

interface StreamState {
  readonly stream: Stream;
  session: Session | undefined;
  opened:
    | { seq: number; message: Omit<Extract<NodeMessage, { kind: "opened" }>, "tag"> }
    | undefined;
  readonly held: Held[];
  /** Messages not read yet: the service stopped reading (back-pressure). */
  readonly unread: GuestMessage[];
}

export class SimGuestService {
  private readonly deps: SimGuestServiceDeps;
  private readonly states = new Set<StreamState>();
  private readonly bySession = new Map<string, StreamState>();
  private paused = false;
  ackedSeq = 0;
  releasedSeq = 0;
  readonly applied = { frames: 0, acknowledged: 0, sessions: 0 };

  constructor(deps: SimGuestServiceDeps) {
    this.deps = deps;
  }

  get heldReplies(): number {
    let n = 0;
    for (const s of this.states) n += s.held.length;
    return n;
  }

  /** Sessions with a stream attached. */
  get openStreams(): number {
    return this.bySession.size;
  }

  /** The simulator reaps no idle sessions. */
  reapIdle(): void {}

  get isPaused(): boolean {
    return this.paused;
  }

  setPaused(paused: boolean): void {
    if (paused === this.paused) return;
    this.paused = paused;
    // A resumed stream emits what it buffered on a later tick.
    if (!paused) this.deps.proc.defer(() => this.readUnread());
  }

  private readUnread(): void {
    for (const s of [...this.states]) {
      while (!this.paused && s.unread.length > 0 && this.states.has(s)) {
        this.onMessage(s, s.unread.shift()!);
      }
    }
  }

  release(): void {
    for (const s of [...this.states]) this.flush(s);
  }

  endAll(message: string): void {
    for (const s of [...this.states]) {
      s.held.length = 0;
      this.sessionError(s, ErrorCode.NOT_PRIMARY, message, this.deps.redirect());
    }
    this.states.clear();
    this.bySession.clear();
  }

  serve(stream: Stream): void {
    const state: StreamState = {
      stream,
      session: undefined,
      opened: undefined,
      held: [],
      unread: [],
    };
    this.states.add(state);
    stream.onMessage((m) => {
      if (this.paused || state.unread.length > 0) state.unread.push(m);
      else this.onMessage(state, m);
    });
    stream.onClose(() => this.forget(state));
    // A stream handed over paused (parked during a promotion) flows once this service reads.
    stream.resumeReading();
  }

  private onMessage(state: StreamState, message: GuestMessage): void {
    if (!this.deps.serving()) {
      this.sessionError(
        state,
        ErrorCode.NOT_PRIMARY,
        "this node does not serve guests now",
        this.deps.redirect(),
      );
      return;
    }
    switch (message.kind) {
      case "open":
        if (state.session !== undefined) {
          this.sessionError(state, ErrorCode.MALFORMED, "session already open on this stream");
          return;
        }
        this.open(state, message);
        break;
      case "frames":
        if (state.session === undefined) {
          this.sessionError(state, ErrorCode.MALFORMED, "open the session first");
          return;
        }
        this.applyFrames(state, state.session, message.frames);
        break;
    }
    this.deps.afterApply();
  }

  private forget(state: StreamState): void {
    this.states.delete(state);
    if (state.session !== undefined && this.bySession.get(state.session.id) === state) {
      this.bySession.delete(state.session.id);
    }
  }

  private open(state: StreamState, open: Extract<GuestMessage, { kind: "open" }>): void {
    const { sequencer } = this.deps;
    let session: Session | undefined;
    let seq = 0;
    if (open.resumeSessionId !== "") {
      session = sequencer.backend.sessions.get(open.resumeSessionId);
      if (session === undefined || session.tenant !== open.tenant) {
        this.sessionError(state, ErrorCode.UNKNOWN_SESSION, "no such session");
        return;
      }
      const older = this.bySession.get(session.id);
      if (older !== undefined && older !== state) {
        this.sessionError(older, ErrorCode.UNKNOWN_SESSION, "session resumed on another stream");
      }
      seq = sequencer.log.lastSeq + (sequencer.mmioPending ? 1 : 0);
    } else {
      const opened = sequencer.openSession(this.deps.newSessionId(), open.tenant);
      if ("code" in opened) {
        this.sessionError(state, opened.code, opened.message);
        return;
      }
      session = opened;
      this.applied.sessions++;
      seq = sequencer.log.lastSeq;
    }
    state.session = session;
    this.bySession.set(session.id, state);
    state.opened = {
      seq,
      message: {
        kind: "opened",
        sessionId: session.id,
        epoch: this.deps.epoch(),
        lastFrame: session.lastFrame,
        nodeId: this.deps.nodeId,
      },
    };
    this.flush(state);
  }

  private applyFrames(state: StreamState, session: Session, frames: readonly Frame[]): void {
    const { sequencer } = this.deps;
    if (state.held.length + frames.length > this.deps.maxFramesInFlight) {
      this.sessionError(
        state,
        ErrorCode.LIMIT_EXCEEDED,
        `${state.held.length + frames.length} frames unanswered, limit ${this.deps.maxFramesInFlight}`,
      );
      return;
    }
    for (const frame of frames) {
      const { outcome, seq } = sequencer.applyFrame(session, frame);
      if (outcome.kind === "applied") this.applied.frames++;
      state.held.push({
        frame: session.lastFrame,
        seq,
        number: frame.number,
        result: outcome.result,
      });
    }
    this.flush(state);
  }

  private flush(state: StreamState): void {
    if (!this.states.has(state)) return;
    const replicated = this.deps.replicatedSeq();
    const ready = (seq: number) => replicated === undefined || seq <= replicated;
    if (state.opened) {
      if (!ready(state.opened.seq)) return;
      const tag = this.deps.tag();
      state.stream.send({ ...state.opened.message, tag });
      this.releasedSeq = Math.max(this.releasedSeq, state.opened.seq);
      this.deps.onRelease([
        { sessionId: state.opened.message.sessionId, frame: 0, seq: state.opened.seq },
      ]);
      state.opened = undefined;
    }
    let n = 0;
    while (n < state.held.length && ready(state.held[n]!.seq)) n++;
    if (n > 0) this.writeAcks(state, state.held.splice(0, n));
  }

  private writeAcks(state: StreamState, out: Held[]): void {
    const last = out.at(-1)!;
    this.applied.acknowledged += out.length;
    if (last.seq > this.ackedSeq) this.ackedSeq = last.seq;
    if (last.seq > this.releasedSeq) this.releasedSeq = last.seq;
    const sessionId = state.session!.id;
    this.deps.onRelease(out.map((h) => ({ sessionId, frame: h.number, seq: h.seq })));
    state.stream.send({
      kind: "acks",
      epoch: this.deps.epoch(),
      ackedThrough: last.frame,
      results: out.map((h) => ({ frame: h.number, result: h.result })),
      tag: this.deps.tag(),
    });
  }

  private sessionError(state: StreamState, code: ErrorCode, message: string, redirect = ""): void {
    if (state.stream.isOpen) {
      state.stream.send({ kind: "error", code, message, redirect });
      state.stream.close("session error");
    }
    this.forget(state);
  }
}
