// A guest session: frames pipelined over one stream (many in flight, packed several per message),
// results delivered per frame, typed calls on top (session-calls.ts) — and exactly-once across
// failovers. The rules (reconnect, resume, re-send, which node to believe, when to give up) are
// the pure SessionMachine's (core/session-machine.ts); this is its driver over ports (a dialer,
// timers, a clock, jitter: grpc-js and Node in the library, the failover simulator's in the
// simulator), which opens streams, re-sends every frame not yet answered after a resume, and
// delivers results. The node answers frames it already applied from its replicated reply cache.
import { create } from "@bufbuild/protobuf";
import {
  type Call,
  type CallResult,
  decodeResult,
  ErrorCode,
  encodeFrame,
  type FrameBody,
  nodeTimers,
  type StoreBatch,
  VgpuError,
  wire,
} from "@vgpu-ha/common";
import { type GuestTls, grpcDialer, guestChannel, refusalError } from "./connection.js";
import { CopyRing } from "./copy-ring.js";
import { type NodeRefusal, SessionMachine, type SessionStep } from "./core/session-machine.js";
import { SessionClosedError } from "./errors.js";
import { FrameWindow } from "./frame-window.js";
import { handshake, type OpenedStream } from "./handshake.js";
import type { SessionPorts } from "./ports.js";
import { SessionCalls } from "./session-calls.js";
import { invalidCall, invalidStores } from "./validate.js";

export { buf, f32, i32, u32 } from "./session-calls.js";

export interface SessionOptions {
  /** host:port of a node's guest API (use `endpoints` to give both nodes of a pair). */
  readonly endpoint?: string;
  /** The nodes of the pair, tried in order after the first fails. */
  readonly endpoints?: readonly string[];
  readonly tenant: string;
  /** The tenant's token; may be empty when a client certificate (tls.cert) names the tenant. */
  readonly token: string;
  /** TLS to nodes with guest.tls on; plaintext when left out. */
  readonly tls?: GuestTls;
  /** Frames sent but not yet acknowledged, at most (the node's guest.maxFramesInFlight or less). */
  readonly maxFramesInFlight?: number;
  /** Frames packed into one gRPC message, at most. */
  readonly maxFramesPerMessage?: number;
  readonly maxMessageBytes?: number;
  /** How long to keep trying to reach a serving node after a failure before giving up. */
  readonly failoverTimeoutMs?: number;
  /** How long one connection attempt may wait for the node's answer (default 5 s to open, 1 s to resume). */
  readonly connectTimeoutMs?: number;
  /** Longest pause between reconnection attempts (they start at 10 ms and double). */
  readonly retryMaxMs?: number;
  /** Ping interval (and timeout) that detects a node which stopped answering; default 500 ms. */
  readonly keepaliveMs?: number;
  /**
   * The cluster id of the pair (its nodes' clusterId): a node of another cluster answers
   * WRONG_CLUSTER instead of serving (or UNAUTHENTICATED). Not checked when left out.
   */
  readonly clusterId?: string;
  /**
   * Sessions one HTTP/2 connection carries at most (the node's guest.maxStreamsPerConnection;
   * default 64); more open further connections. A node with a lower limit says so, and the
   * client adapts.
   */
  readonly maxStreamsPerConnection?: number;
  /**
   * HTTP/2 receive window of each connection and stream, in bytes (default 4 MiB): how much
   * of the node's replies (dma_read data) may be on their way before this process reads them.
   */
  readonly receiveWindowBytes?: number;
}

const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/**
 * The ring dmaWrite copies are cut from (allocated at a session's first dmaWrite): 4 MiB holds
 * 64 writes of 64 KiB in flight; writes beyond it get buffers of their own.
 */
const DMA_COPY_RING_BYTES = 4 * 1024 * 1024;
/**
 * Bytes of frames one message carries, about (small frames are packed up to maxFramesPerMessage
 * far below it). The node decodes a message only once all of it has arrived, so sixteen 64 KiB
 * writes in one 1 MiB message leave it idle while they travel, then busy while nothing does;
 * messages of at most 256 KiB keep both ends working (docs/benchmarks.md, "DMA 64 KiB").
 */
const MESSAGE_BYTES_TARGET = 256 * 1024;

export class Session extends SessionCalls {
  private readonly machine: SessionMachine;
  private readonly options: SessionOptions;
  private readonly ports: SessionPorts;
  private conn: OpenedStream | undefined;
  private window = new FrameWindow(0);
  /** The copies of dmaWrite data while their frames are unanswered. */
  private readonly copies = new CopyRing(DMA_COPY_RING_BYTES);
  private readonly maxInFlight: number;
  private readonly maxPerMessage: number;
  private flushScheduled = false;
  private closing = false;
  private closedError: Error | undefined;
  private closeWaiters: (() => void)[] = [];
  /** While opening: told once whether the session opened. */
  private opening: ((error: Error | undefined) => void) | undefined;

  private constructor(options: SessionOptions, ports: SessionPorts) {
    super();
    const endpoints = [
      ...(options.endpoints ?? []),
      ...(options.endpoint ? [options.endpoint] : []),
    ];
    if (endpoints.length === 0) throw new Error("Session.open needs endpoint or endpoints");
    this.machine = new SessionMachine({
      endpoints,
      failoverTimeoutMs: options.failoverTimeoutMs ?? 30_000,
      retryMaxMs: options.retryMaxMs ?? 100,
    });
    this.options = options;
    this.ports = ports;
    this.maxInFlight = options.maxFramesInFlight ?? 1024;
    this.maxPerMessage = options.maxFramesPerMessage ?? 256;
  }

  /** Opens a new session on the first endpoint that serves guests. */
  static open(options: SessionOptions): Promise<Session> {
    const ports: SessionPorts = {
      dial: grpcDialer({
        maxMessageBytes: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
        channel: guestChannel(options.tls),
        streamsPerConnection: options.maxStreamsPerConnection,
        ...(options.keepaliveMs !== undefined ? { keepaliveMs: options.keepaliveMs } : {}),
        ...(options.receiveWindowBytes !== undefined
          ? { receiveWindowBytes: options.receiveWindowBytes }
          : {}),
      }),
      timers: nodeTimers,
      nowMs: () => performance.now(),
      random: Math.random,
      defer: queueMicrotask,
    };
    return new Promise((resolve, reject) => {
      Session.start(options, ports, (error, session) =>
        error ? reject(error) : resolve(session!),
      );
    });
  }

  /** Opens a new session over the given ports; `done` is told once, with the session or why not. */
  static start(
    options: SessionOptions,
    ports: SessionPorts,
    done: (error: Error | undefined, session: Session | undefined) => void,
  ): void {
    const session = new Session(options, ports);
    session.opening = (error) => done(error, error === undefined ? session : undefined);
    session.run(session.machine.open(), undefined);
  }

  /** The session's id (the node's). */
  get id(): string {
    return this.machine.sessionId;
  }

  /** The node serving the session now. */
  get nodeId(): string {
    return this.machine.nodeId;
  }

  /** Highest epoch seen in any reply. */
  get epoch(): number {
    return this.machine.epoch;
  }

  /** Times the session moved to another stream (reconnects and failovers). */
  get resumes(): number {
    return this.machine.resumes;
  }

  /** Frames sent or queued and not yet answered. */
  get unsettled(): number {
    return this.window.size;
  }

  /** The highest frame whose result was delivered. */
  get settledThrough(): number {
    return this.window.settledThrough;
  }

  /** Looking for a node to resume on. */
  get reconnecting(): boolean {
    return this.machine.phase === "reconnecting";
  }

  /** Why the session ended (undefined while it is open). */
  get failure(): Error | undefined {
    return this.closedError;
  }

  // ---- the machine's steps ----

  private run(steps: SessionStep | readonly SessionStep[], dialed: OpenedStream | undefined): void {
    for (const step of Array.isArray(steps) ? steps : [steps as SessionStep]) {
      switch (step.kind) {
        case "dial":
          this.dial(step.endpoint, step.resumeSessionId);
          break;
        case "retry":
          this.ports.timers.setTimeout(step.afterMs, () =>
            this.run(this.machine.retryDue(this.ports.nowMs()), undefined),
          );
          break;
        case "attach":
          this.attach(dialed!, step.resumed);
          break;
        case "drop":
          dialed?.stream.cancel();
          break;
        case "fail":
          this.fail(refusalError(step.error));
          break;
      }
    }
  }

  private dial(endpoint: string, resumeSessionId: string): void {
    const o = this.options;
    const timeoutMs = o.connectTimeoutMs ?? (resumeSessionId === "" ? 5000 : 1000);
    const open = {
      tenant: o.tenant,
      token: o.token,
      resumeSessionId,
      ...(o.clusterId !== undefined ? { clusterId: o.clusterId } : {}),
    };
    handshake(this.ports, endpoint, open, timeoutMs, (outcome) => {
      const opened = "stream" in outcome ? outcome : undefined;
      const ctx = {
        settledThrough: this.window.settledThrough,
        nowMs: this.ports.nowMs(),
        random: () => this.ports.random(),
      };
      this.run(
        this.machine.dialed(endpoint, opened?.opened ?? (outcome as NodeRefusal), ctx),
        opened,
      );
    });
  }

  private attach(conn: OpenedStream, resumed: boolean): void {
    this.conn = conn;
    conn.stream.listen({
      message: (m) => this.onMessage(conn, m),
      closed: (reason) =>
        this.lost(conn, {
          code: ErrorCode.NOT_PRIMARY,
          message: reason,
          redirect: "",
          answered: false,
        }),
    });
    if (!resumed) {
      this.window = new FrameWindow(conn.opened.lastFrame);
      const opening = this.opening;
      this.opening = undefined;
      opening?.(undefined);
      this.ports.observer?.changed?.();
    } else {
      this.window.rewind();
      this.send();
    }
  }

  /** The stream broke or the node refused: the machine says where to resume, or to fail. */
  private lost(conn: OpenedStream, error: NodeRefusal): void {
    if (this.conn !== conn) return;
    this.conn = undefined;
    conn.stream.cancel();
    this.run(this.machine.lost(error, this.closing, this.ports.nowMs()), undefined);
  }

  private fail(error: Error): void {
    if (this.closedError) return;
    this.closedError = error;
    if (this.machine.phase !== "failed") {
      const code = error instanceof SessionClosedError ? error.code : ErrorCode.NOT_PRIMARY;
      this.machine.fail({ code, message: error.message, redirect: "", answered: false });
    }
    this.window.failAll(error);
    this.conn?.stream.cancel();
    this.conn = undefined;
    for (const wake of this.closeWaiters.splice(0)) wake();
    const opening = this.opening;
    this.opening = undefined;
    // A session that never opened is the opener's to report; an open one, the observer's.
    if (opening) opening(error);
    else this.ports.observer?.changed?.();
  }

  // ---- raw frames ----

  /**
   * Sends one call; resolves with its result whatever the code. The call is checked and its
   * data copied now, so the caller may reuse its buffers at once.
   */
  call(call: Call): Promise<CallResult> {
    this.flushStores();
    if (call.op !== "dmaWrite") return this.enqueue({ kind: "call", call });
    const refused = this.refusal({ kind: "call", call });
    if (refused) return Promise.reject(refused);
    // The copy is released when its frame settles; frames settle in order (copy-ring.ts).
    const owned: Call = { ...call, data: this.copies.copy(call.data) };
    return new Promise<CallResult>((resolve, reject) => {
      this.window.add({ kind: "call", call: owned }, (outcome) => {
        this.copies.releaseOldest();
        if (outcome instanceof Error) reject(outcome);
        else resolve(outcome);
      });
      this.scheduleSend();
    });
  }

  /** Sends one store batch as a frame (after any pending mapped-buffer stores); its result. */
  storeBatch(batch: StoreBatch): Promise<CallResult> {
    this.flushStores();
    return this.enqueue({ kind: "stores", batch });
  }

  /**
   * Sends one frame without a promise: its result goes to the ports' observer (a driver that
   * runs in simulated time). Its frame number; a frame the library refuses is thrown.
   */
  frame(body: FrameBody): number {
    if (this.closedError) throw this.closedError;
    const invalid = body.kind === "call" ? invalidCall(body.call) : invalidStores(body.batch);
    if (invalid !== null) throw new VgpuError(ErrorCode.MALFORMED, invalid);
    const number = this.window.add(body);
    this.scheduleSend();
    return number;
  }

  private enqueue(body: FrameBody): Promise<CallResult> {
    const refused = this.refusal(body);
    if (refused) return Promise.reject(refused);
    const result = this.window.push(body);
    this.scheduleSend();
    return result;
  }

  /** Why a frame is refused before it is queued (the session closed, or the frame is invalid). */
  private refusal(body: FrameBody): Error | undefined {
    if (this.closedError) return this.closedError;
    const invalid = body.kind === "call" ? invalidCall(body.call) : invalidStores(body.batch);
    return invalid === null ? undefined : new VgpuError(ErrorCode.MALFORMED, invalid);
  }

  private scheduleSend(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    this.ports.defer(() => {
      this.flushScheduled = false;
      this.flushStores();
      this.send();
    });
  }

  private send(): void {
    const conn = this.conn;
    if (conn === undefined) return;
    const budget = Math.min(
      MESSAGE_BYTES_TARGET,
      (this.options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES) / 2,
    );
    for (;;) {
      const room = Math.min(this.maxPerMessage, this.maxInFlight - this.window.inFlight);
      if (room <= 0) return;
      // Several frames per message, but about MESSAGE_BYTES_TARGET of them at most (and never
      // more than half the message limit: a resend after failover may find many large frames
      // waiting). A frame larger than that goes alone.
      const frames = this.window.takeUnsent(room, budget, frameBytes);
      if (frames.length === 0) return;
      conn.stream.send(
        create(wire.GuestMessageSchema, {
          kind: { case: "frames", value: { frames: frames.map(encodeFrame) } },
        }),
      );
    }
  }

  private onMessage(conn: OpenedStream, m: wire.NodeMessage): void {
    if (this.conn !== conn) return;
    const k = m.kind;
    switch (k.case) {
      case "acks": {
        // A reply from an older epoch is never believed.
        if (!this.machine.acks(Number(k.value.epoch))) return;
        const observer = this.ports.observer;
        for (const r of k.value.results) {
          const before = this.window.settledThrough;
          const frame = Number(r.frame);
          const result = decodeResult(r.result);
          this.window.settle(frame, result);
          if (this.window.settledThrough > before) observer?.settled?.(frame, result, m);
        }
        this.send();
        observer?.changed?.();
        return;
      }
      case "error": {
        const { code, message, redirect } = k.value;
        this.lost(conn, { code, message, redirect, answered: true });
        return;
      }
      case "closed":
        this.fail(new SessionClosedError(ErrorCode.OK, "session closed"));
        return;
      default:
        return;
    }
  }

  /** Called by mapped buffers when they hold stores: send them soon. */
  storesPending(): void {
    this.scheduleSend();
  }

  /** Resolves when every frame so far is acknowledged; throws a mapped buffer's first error. */
  async drain(): Promise<void> {
    this.flushStores();
    await this.window.settled();
    if (this.closedError) throw this.closedError;
    for (const m of this.mapped) await m.flush();
  }

  /** Closes the session: the node destroys its contexts. */
  async close(): Promise<void> {
    if (this.closedError) return;
    this.flushStores();
    await this.window.settled(); // every frame answered before the Close
    const conn = this.conn;
    if (this.closedError || conn === undefined) return;
    this.closing = true;
    const done = new Promise<void>((resolve) => this.closeWaiters.push(resolve));
    conn.stream.send(create(wire.GuestMessageSchema, { kind: { case: "close", value: {} } }));
    conn.stream.end();
    await done;
    this.fail(new SessionClosedError(ErrorCode.OK, "session closed"));
  }
}

/** About the bytes a frame takes on the wire. */
function frameBytes(body: FrameBody): number {
  if (body.kind === "stores")
    return 32 + body.batch.data.byteLength + 5 * body.batch.offsets.length;
  return 64 + (body.call.op === "dmaWrite" ? body.call.data.byteLength : 0);
}
