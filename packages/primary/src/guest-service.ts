// The guest service: one gRPC bidirectional stream per session. Opens or resumes the session,
// applies each frame through the backend in order, and answers each Frames message with one
// Acks message (cumulative acknowledgement plus one result per frame).
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
import type { Backend, SessionRecordLike } from "./backend-types.js";
import type { TenantAuth } from "./tenant-auth.js";

type Stream = grpc.ServerDuplexStream<wire.GuestMessage, wire.NodeMessage>;

export interface GuestServiceDeps {
  readonly backend: Backend;
  readonly auth: TenantAuth;
  readonly metrics: NodeMetrics;
  readonly log: Logger;
  readonly nodeId: string;
  readonly epoch: () => number;
  /** Frames one Frames message may carry (a guest keeps at most this many in flight). */
  readonly maxFramesInFlight: number;
  /** Whether this node serves guests now; when not, streams get NOT_PRIMARY. */
  readonly serving: () => boolean;
  /** Called after each batch of frames was applied (e.g. to drain MMIO dirty pages). */
  readonly afterApply?: () => void;
}

export class GuestService {
  private readonly deps: GuestServiceDeps;
  /** The live stream of each session; a resume elsewhere ends the older one. */
  private readonly streams = new Map<string, Stream>();

  constructor(deps: GuestServiceDeps) {
    this.deps = deps;
  }

  get openStreams(): number {
    return this.streams.size;
  }

  handlers(): ServiceHandlers<typeof wire.Guest> {
    return { session: (stream) => this.serve(stream) };
  }

  /** Ends every stream with NOT_PRIMARY (shutdown or loss of the role). */
  endAll(message: string): void {
    for (const stream of [...this.streams.values()]) {
      this.sessionError(stream, ErrorCode.NOT_PRIMARY, message);
    }
    this.streams.clear();
  }

  private serve(stream: Stream): void {
    let session: SessionRecordLike | undefined;
    stream.on("data", (message: wire.GuestMessage) => {
      if (!this.deps.serving()) {
        this.sessionError(stream, ErrorCode.NOT_PRIMARY, "this node does not serve guests now");
        return;
      }
      const kind = message.kind;
      if (kind.case === "open") {
        if (session !== undefined) {
          this.sessionError(stream, ErrorCode.MALFORMED, "session already open on this stream");
          return;
        }
        session = this.open(stream, kind.value);
      } else if (kind.case === "frames") {
        if (session === undefined) {
          this.sessionError(stream, ErrorCode.MALFORMED, "open the session first");
          return;
        }
        this.applyFrames(stream, session, kind.value.frames);
      } else if (kind.case === "close") {
        if (session !== undefined) {
          this.deps.backend.closeSession(session.id);
          this.streams.delete(session.id);
          this.deps.log.debug({ session: session.id }, "session closed");
        }
        stream.write(create(wire.NodeMessageSchema, { kind: { case: "closed", value: {} } }));
        stream.end();
      } else {
        this.sessionError(stream, ErrorCode.MALFORMED, "empty guest message");
      }
    });
    stream.on("error", () => this.forget(stream, session));
    stream.on("cancelled", () => this.forget(stream, session));
    stream.on("end", () => {
      this.forget(stream, session);
      stream.end();
    });
  }

  private forget(stream: Stream, session: SessionRecordLike | undefined): void {
    if (session !== undefined && this.streams.get(session.id) === stream) {
      this.streams.delete(session.id);
    }
  }

  private open(stream: Stream, open: wire.Open): SessionRecordLike | undefined {
    const { backend, auth, metrics } = this.deps;
    if (!auth.check(open.tenant, open.token)) {
      this.sessionError(stream, ErrorCode.UNAUTHENTICATED, "unknown tenant or wrong token");
      return undefined;
    }
    let session: SessionRecordLike | undefined;
    if (open.resumeSessionId !== "") {
      session = backend.sessions.get(open.resumeSessionId);
      // Someone else's session is exactly as unknown as a session that never existed.
      if (session === undefined || session.tenant !== open.tenant) {
        this.sessionError(stream, ErrorCode.UNKNOWN_SESSION, "no such session");
        return undefined;
      }
      const older = this.streams.get(session.id);
      if (older !== undefined && older !== stream) {
        this.sessionError(older, ErrorCode.UNKNOWN_SESSION, "session resumed on another stream");
      }
      metrics.sessionsOpened.inc({ kind: "resume" });
    } else {
      const opened = backend.openSession(randomUUID(), open.tenant);
      if ("code" in opened) {
        this.sessionError(stream, opened.code, opened.message);
        return undefined;
      }
      session = opened;
      metrics.sessionsOpened.inc({ kind: "new" });
    }
    this.streams.set(session.id, stream);
    this.deps.log.debug({ session: session.id, tenant: session.tenant }, "session opened");
    stream.write(
      create(wire.NodeMessageSchema, {
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
    );
    return session;
  }

  private applyFrames(
    stream: Stream,
    session: SessionRecordLike,
    frames: readonly wire.Frame[],
  ): void {
    const { backend, metrics } = this.deps;
    if (frames.length > this.deps.maxFramesInFlight) {
      this.sessionError(
        stream,
        ErrorCode.LIMIT_EXCEEDED,
        `${frames.length} frames in one message, limit ${this.deps.maxFramesInFlight}`,
      );
      return;
    }
    const results: wire.FrameResult[] = [];
    for (const wireFrame of frames) {
      const frame = decodeFrame(wireFrame);
      if (frame instanceof MalformedError) {
        metrics.frames.inc({ outcome: "rejected" });
        results.push(encodeFrameResult(Number(wireFrame.number), malformedResult(frame)));
        continue;
      }
      const started = process.hrtime.bigint();
      const outcome = backend.applyFrame(session, frame);
      metrics.frames.inc({ outcome: outcome.kind });
      if (outcome.kind === "applied") {
        const op = frame.body.kind === "call" ? frame.body.call.op : "stores";
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        metrics.calls.inc({ op, code: errorName(outcome.result.code) });
        metrics.callDuration.observe({ op }, seconds);
        if (frame.body.kind === "stores" && outcome.result.code === ErrorCode.OK) {
          metrics.mmioStores.inc(frame.body.batch.offsets.length);
        }
      }
      results.push(encodeFrameResult(frame.number, outcome.result));
    }
    this.deps.afterApply?.();
    stream.write(
      create(wire.NodeMessageSchema, {
        kind: {
          case: "acks",
          value: {
            epoch: BigInt(this.deps.epoch()),
            ackedThrough: BigInt(session.lastFrame),
            results,
          },
        },
      }),
    );
  }

  private sessionError(stream: Stream, code: ErrorCode, message: string, redirect = ""): void {
    this.deps.metrics.sessionErrors.inc({ code: errorName(code) });
    if (stream.writable) {
      stream.write(
        create(wire.NodeMessageSchema, {
          kind: { case: "error", value: { code, message, redirect } },
        }),
      );
      stream.end();
    }
  }
}

function malformedResult(e: MalformedError): CallResult {
  return { code: ErrorCode.MALFORMED, message: e.message, output: { kind: "none" } };
}
