// The guest service: one gRPC bidirectional stream per session. Opens or resumes the session,
// applies each frame through the sequencer (which logs it for the standby), and answers with
// Acks: cumulative acknowledgement plus one result per frame. A reply is released only once
// the standby has applied the frame's entry when the node says so (sync mode), so a guest is
// never told about anything a failover could lose.
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import type * as grpc from "@grpc/grpc-js";
import {
  type CallResult,
  decodeFrame,
  ErrorCode,
  encodeFrameResult,
  errorName,
  type Logger,
  MalformedError,
  type NodeMetrics,
  type ServiceHandlers,
  wire,
} from "@vgpu-ha/common";
import type { Sequencer } from "./core/sequencer.js";
import type { TenantAuth } from "./tenant-auth.js";

type Stream = grpc.ServerDuplexStream<wire.GuestMessage, wire.NodeMessage>;
type Session = NonNullable<ReturnType<Sequencer["backend"]["sessions"]["get"]>>;

export interface GuestServiceDeps {
  readonly sequencer: Sequencer;
  readonly auth: TenantAuth;
  readonly metrics: NodeMetrics;
  readonly log: Logger;
  readonly nodeId: string;
  readonly epoch: () => number;
  /** Frames a session may have sent and not had answered yet. */
  readonly maxFramesInFlight: number;
  /** Largest gRPC message: replies are split so no Acks message exceeds half of it. */
  readonly maxMessageBytes: number;
  /** Whether this node serves guests now; when not, streams get NOT_PRIMARY. */
  readonly serving: () => boolean;
  /**
   * Replies whose seq is at most this may go out: the seq the standby has applied (sync mode),
   * -1 to hold every reply (a primary without its lease), undefined to release at once.
   */
  readonly replicatedSeq: () => number | undefined;
  /** Called after each guest message was applied (to schedule MMIO flush and sending). */
  readonly afterApply?: () => void;
  /** Where guests should go instead, for NOT_PRIMARY. */
  readonly redirect?: () => string;
}

interface Held {
  readonly frame: number;
  readonly seq: number;
  readonly result: wire.FrameResult;
}

/** One guest stream: its session and the replies waiting for replication. */
interface StreamState {
  readonly stream: Stream;
  session: Session | undefined;
  /** The Opened reply, held until the session-open entry is replicated. */
  opened: { seq: number; message: wire.NodeMessage } | undefined;
  readonly held: Held[];
  /** After a Close: the seq of the close entry; Closed goes out once it is replicated. */
  closing: number | undefined;
}

export class GuestService {
  private readonly deps: GuestServiceDeps;
  private readonly states = new Set<StreamState>();
  /** The live stream of each session; a resume elsewhere ends the older one. */
  private readonly bySession = new Map<string, StreamState>();
  private paused = false;
  /** Highest frame acknowledged to a guest, by seq: for status (acknowledged seq). */
  ackedSeq = 0;
  /** The highest seq any reply (an ack, a session opened or closed) went out for. */
  releasedSeq = 0;
  /** Frames applied, replies sent and sessions opened (for what a primary would discard). */
  readonly applied = { frames: 0, acknowledged: 0, sessions: 0 };

  /** Labelled metric children, looked up once per label set (the per-frame path is hot). */
  private readonly counters;

  constructor(deps: GuestServiceDeps) {
    this.deps = deps;
    const m = deps.metrics;
    const memo = <K, V>(make: (key: K) => V) => {
      const cache = new Map<K, V>();
      return (key: K) => {
        let v = cache.get(key);
        if (v === undefined) {
          v = make(key);
          cache.set(key, v);
        }
        return v;
      };
    };
    const calls = memo((key: string) => {
      const [op, code] = key.split("/") as [string, string];
      return m.calls.labels({ op, code });
    });
    this.counters = {
      frame: memo((outcome: string) => m.frames.labels({ outcome })),
      call: (op: string, code: ErrorCode) => calls(`${op}/${errorName(code)}`),
      duration: memo((op: string) => m.callDuration.labels({ op })),
    };
  }

  get openStreams(): number {
    return this.bySession.size;
  }

  /** Replies waiting for the standby. */
  get heldReplies(): number {
    let n = 0;
    for (const s of this.states) n += s.held.length;
    return n;
  }

  handlers(): ServiceHandlers<typeof wire.Guest> {
    return { session: (stream) => this.serve(stream) };
  }

  /** Stops (or resumes) reading guest streams: back-pressure while the standby lags. */
  setPaused(paused: boolean): void {
    if (paused === this.paused) return;
    this.paused = paused;
    for (const s of this.states) {
      if (paused) s.stream.pause();
      else s.stream.resume();
    }
  }

  /** Sends every held reply whose entry the standby has now applied. */
  release(): void {
    for (const s of this.states) this.flush(s);
  }

  /** Ends every stream with NOT_PRIMARY (shutdown or loss of the role); held replies are dropped. */
  endAll(message: string): void {
    for (const s of [...this.states]) {
      s.held.length = 0;
      this.sessionError(s, ErrorCode.NOT_PRIMARY, message, this.deps.redirect?.() ?? "");
    }
    this.states.clear();
    this.bySession.clear();
  }

  /** Serves one guest stream. */
  serve(stream: Stream): void {
    const state: StreamState = {
      stream,
      session: undefined,
      opened: undefined,
      held: [],
      closing: undefined,
    };
    this.states.add(state);
    stream.on("data", (message: wire.GuestMessage) => this.onMessage(state, message));
    // A stream handed over paused (parked during a promotion) flows once this service may read.
    if (this.paused) stream.pause();
    else stream.resume();
    const forget = () => this.forget(state);
    stream.on("error", forget);
    stream.on("cancelled", forget);
    stream.on("end", () => {
      forget();
      stream.end();
    });
  }

  private onMessage(state: StreamState, message: wire.GuestMessage): void {
    if (!this.deps.serving()) {
      this.sessionError(
        state,
        ErrorCode.NOT_PRIMARY,
        "this node does not serve guests now",
        this.deps.redirect?.() ?? "",
      );
      return;
    }
    if (state.closing !== undefined) {
      this.sessionError(state, ErrorCode.MALFORMED, "message after Close");
      return;
    }
    const kind = message.kind;
    switch (kind.case) {
      case "open":
        if (state.session !== undefined) {
          this.sessionError(state, ErrorCode.MALFORMED, "session already open on this stream");
          return;
        }
        this.open(state, kind.value);
        break;
      case "frames":
        if (state.session === undefined) {
          this.sessionError(state, ErrorCode.MALFORMED, "open the session first");
          return;
        }
        this.applyFrames(state, state.session, kind.value.frames);
        break;
      case "close":
        // Closed follows the replies still held, once the close itself is replicated.
        state.closing = 0;
        if (state.session !== undefined) {
          state.closing = this.deps.sequencer.closeSession(state.session.id);
          this.bySession.delete(state.session.id);
          this.deps.log.debug({ session: state.session.id }, "session closed");
        }
        this.flush(state);
        break;
      default:
        this.sessionError(state, ErrorCode.MALFORMED, "empty guest message");
        return;
    }
    this.deps.afterApply?.();
  }

  private forget(state: StreamState): void {
    this.states.delete(state);
    if (state.session !== undefined && this.bySession.get(state.session.id) === state) {
      this.bySession.delete(state.session.id);
    }
  }

  private open(state: StreamState, open: wire.Open): void {
    const { sequencer, auth, metrics } = this.deps;
    if (!auth.check(open.tenant, open.token)) {
      this.sessionError(state, ErrorCode.UNAUTHENTICATED, "unknown tenant or wrong token");
      return;
    }
    let session: Session | undefined;
    let seq = 0;
    if (open.resumeSessionId !== "") {
      session = sequencer.backend.sessions.get(open.resumeSessionId);
      // Someone else's session is exactly as unknown as a session that never existed.
      if (session === undefined || session.tenant !== open.tenant) {
        this.sessionError(state, ErrorCode.UNKNOWN_SESSION, "no such session");
        return;
      }
      const older = this.bySession.get(session.id);
      if (older !== undefined && older !== state) {
        this.sessionError(older, ErrorCode.UNKNOWN_SESSION, "session resumed on another stream");
      }
      // Its frames so far may not all be on the standby yet.
      seq = sequencer.log.lastSeq + (sequencer.mmioPending ? 1 : 0);
      metrics.sessionsOpened.inc({ kind: "resume" });
    } else {
      const opened = sequencer.openSession(randomUUID(), open.tenant);
      if ("code" in opened) {
        this.sessionError(state, opened.code, opened.message);
        return;
      }
      session = opened;
      this.applied.sessions++;
      seq = sequencer.log.lastSeq;
      metrics.sessionsOpened.inc({ kind: "new" });
    }
    state.session = session;
    this.bySession.set(session.id, state);
    this.deps.log.debug({ session: session.id, tenant: session.tenant }, "session opened");
    state.opened = {
      seq,
      message: create(wire.NodeMessageSchema, {
        kind: {
          case: "opened",
          value: {
            sessionId: session.id,
            epoch: BigInt(this.deps.epoch()),
            lastFrame: BigInt(session.lastFrame),
            nodeId: this.deps.nodeId,
          },
        },
      }),
    };
    this.flush(state);
  }

  private applyFrames(state: StreamState, session: Session, frames: readonly wire.Frame[]): void {
    const { sequencer, metrics } = this.deps;
    if (state.held.length + frames.length > this.deps.maxFramesInFlight) {
      this.sessionError(
        state,
        ErrorCode.LIMIT_EXCEEDED,
        `${state.held.length + frames.length} frames unanswered, limit ${this.deps.maxFramesInFlight}`,
      );
      return;
    }
    for (const wireFrame of frames) {
      const frame = decodeFrame(wireFrame);
      if (frame instanceof MalformedError) {
        metrics.frames.inc({ outcome: "rejected" });
        state.held.push({
          frame: session.lastFrame,
          seq: 0,
          result: encodeFrameResult(Number(wireFrame.number), malformedResult(frame)),
        });
        continue;
      }
      const started = process.hrtime.bigint();
      const { outcome, seq } = sequencer.applyFrame(session, frame);
      this.counters.frame(outcome.kind).inc();
      if (outcome.kind === "applied") {
        this.applied.frames++;
        const op = frame.body.kind === "call" ? frame.body.call.op : "stores";
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        this.counters.call(op, outcome.result.code).inc();
        this.counters.duration(op).observe(seconds);
        if (frame.body.kind === "stores" && outcome.result.code === ErrorCode.OK) {
          metrics.mmioStores.inc(frame.body.batch.offsets.length);
        }
      }
      state.held.push({
        frame: session.lastFrame,
        seq,
        result: encodeFrameResult(frame.number, outcome.result),
      });
    }
    this.flush(state);
  }

  /** Writes the Opened reply and the held results that may go out now, in order. */
  private flush(state: StreamState): void {
    const replicated = this.deps.replicatedSeq();
    const ready = (seq: number) => replicated === undefined || seq <= replicated;
    if (state.opened) {
      if (!ready(state.opened.seq)) return;
      state.stream.write(state.opened.message);
      this.releasedSeq = Math.max(this.releasedSeq, state.opened.seq);
      state.opened = undefined;
    }
    let n = 0;
    while (n < state.held.length && ready(state.held[n]!.seq)) n++;
    if (n > 0) this.writeAcks(state, state.held.splice(0, n));
    if (state.closing !== undefined && state.held.length === 0 && ready(state.closing)) {
      this.releasedSeq = Math.max(this.releasedSeq, state.closing);
      state.stream.write(create(wire.NodeMessageSchema, { kind: { case: "closed", value: {} } }));
      state.stream.end();
      this.states.delete(state);
    }
  }

  /** One or more Acks messages, none above half the message limit. */
  private writeAcks(state: StreamState, out: Held[]): void {
    const budget = this.deps.maxMessageBytes / 2;
    let start = 0;
    let bytes = 0;
    for (let i = 0; i <= out.length; i++) {
      const size = i < out.length ? resultBytes(out[i]!.result) : 0;
      if (i === out.length || (i > start && bytes + size > budget)) {
        const part = out.slice(start, i);
        const last = part.at(-1)!;
        this.applied.acknowledged += part.length;
        if (last.seq > this.ackedSeq) this.ackedSeq = last.seq;
        if (last.seq > this.releasedSeq) this.releasedSeq = last.seq;
        state.stream.write(
          create(wire.NodeMessageSchema, {
            kind: {
              case: "acks",
              value: {
                epoch: BigInt(this.deps.epoch()),
                ackedThrough: BigInt(last.frame),
                results: part.map((h) => h.result),
              },
            },
          }),
        );
        start = i;
        bytes = 0;
      }
      bytes += size;
    }
  }

  private sessionError(state: StreamState, code: ErrorCode, message: string, redirect = ""): void {
    this.deps.metrics.sessionErrors.inc({ code: errorName(code) });
    const stream = state.stream;
    if (stream.writable) {
      stream.write(
        create(wire.NodeMessageSchema, {
          kind: { case: "error", value: { code, message, redirect } },
        }),
      );
      stream.end();
    }
    this.forget(state);
  }
}

function resultBytes(r: wire.FrameResult): number {
  const out = r.result?.output;
  return 64 + (out?.case === "data" ? out.value.byteLength : 0);
}

function malformedResult(e: MalformedError): CallResult {
  return { code: ErrorCode.MALFORMED, message: e.message, output: { kind: "none" } };
}
