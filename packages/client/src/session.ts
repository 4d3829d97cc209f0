// A guest session: frames pipelined over one gRPC stream (many in flight, packed several per
// message), results delivered per frame, typed calls on top — and exactly-once across
// failovers: when the stream breaks or the node says it is not primary, the session reconnects
// (to the node it was pointed at, else the next endpoint), resumes, and re-sends every frame
// not yet answered; the node answers frames it already applied from its replicated reply
// cache instead of applying them again. Replies from an epoch older than one seen are refused.
import { create } from "@bufbuild/protobuf";
import {
  type Call,
  type CallResult,
  decodeResult,
  ErrorCode,
  encodeFrame,
  type KernelArg,
  type StoreBatch,
  VgpuError,
  wire,
} from "@vgpu-ha/common";
import {
  type Connection,
  connect,
  drop,
  type GuestTls,
  guestChannel,
  nodeError,
  RedirectError,
} from "./connection.js";
import { SessionClosedError, SessionExpiredError } from "./errors.js";
import { FrameWindow } from "./frame-window.js";
import { MappedBuffer } from "./mapped-buffer.js";
import { invalidCall, invalidStores } from "./validate.js";

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
  /** How long one connection attempt may wait for the node's answer. */
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
}

/**
 * Codes after which trying another node cannot help. SESSION_EXPIRED (the pair reaped the
 * session or an operator closed it) fails the session with a SessionExpiredError.
 */
const FATAL = new Set<ErrorCode>([
  ErrorCode.UNAUTHENTICATED,
  ErrorCode.UNKNOWN_SESSION,
  ErrorCode.SESSION_EXPIRED,
  ErrorCode.LIMIT_EXCEEDED,
  ErrorCode.MALFORMED,
  ErrorCode.WRONG_CLUSTER,
]);

export class Session {
  readonly id: string;
  /** The node serving the session now. */
  nodeId: string;
  /** Highest epoch seen in any reply. */
  epoch: number;
  /** Times the session moved to another stream (reconnects and failovers). */
  resumes = 0;
  private conn: Connection | undefined;
  private readonly options: SessionOptions;
  private readonly channel: ReturnType<typeof guestChannel>;
  private readonly endpoints: readonly string[];
  private endpointIndex = 0;
  private readonly window: FrameWindow;
  private readonly maxInFlight: number;
  private readonly maxPerMessage: number;
  private readonly mapped = new Set<MappedBuffer>();
  private flushScheduled = false;
  private reconnecting = false;
  private closing = false;
  private closedError: Error | undefined;

  private constructor(
    conn: Connection,
    options: SessionOptions,
    endpoints: readonly string[],
    channel: ReturnType<typeof guestChannel>,
  ) {
    const opened = conn.opened;
    this.channel = channel;
    this.id = opened.sessionId;
    this.nodeId = opened.nodeId;
    this.epoch = Number(opened.epoch);
    this.options = options;
    this.endpoints = endpoints;
    this.endpointIndex = Math.max(0, endpoints.indexOf(conn.endpoint));
    this.window = new FrameWindow(Number(opened.lastFrame));
    this.maxInFlight = options.maxFramesInFlight ?? 1024;
    this.maxPerMessage = options.maxFramesPerMessage ?? 256;
    this.attach(conn);
  }

  /** Opens a new session on the first endpoint that serves guests. */
  static async open(options: SessionOptions): Promise<Session> {
    const endpoints = [
      ...(options.endpoints ?? []),
      ...(options.endpoint ? [options.endpoint] : []),
    ];
    if (endpoints.length === 0) throw new Error("Session.open needs endpoint or endpoints");
    const channel = guestChannel(options.tls);
    let last: unknown;
    for (const endpoint of endpoints) {
      try {
        const conn = await connect(
          endpoint,
          {
            tenant: options.tenant,
            token: options.token,
            ...(options.clusterId !== undefined ? { clusterId: options.clusterId } : {}),
          },
          options.maxMessageBytes ?? 64 * 1024 * 1024,
          options.connectTimeoutMs ?? 5000,
          options.keepaliveMs,
          channel,
          options.maxStreamsPerConnection,
        );
        return new Session(conn, options, endpoints, channel);
      } catch (e) {
        last = e;
        if (e instanceof SessionClosedError && FATAL.has(e.code)) throw e;
      }
    }
    throw last;
  }

  private attach(conn: Connection): void {
    this.conn = conn;
    const { stream } = conn;
    stream.on("data", (m: wire.NodeMessage) => this.onMessage(conn, m));
    stream.on("error", (e: Error) =>
      this.lost(conn, new SessionClosedError(ErrorCode.NOT_PRIMARY, e.message)),
    );
    stream.on("end", () =>
      this.lost(conn, new SessionClosedError(ErrorCode.NOT_PRIMARY, "stream ended")),
    );
  }

  /** The stream broke or the node refused: resume elsewhere, unless that cannot help. */
  private lost(conn: Connection, error: SessionClosedError): void {
    if (this.conn !== conn) return;
    this.conn = undefined;
    drop(conn);
    if (this.closing || FATAL.has(error.code)) {
      this.fail(error);
      return;
    }
    const redirect =
      error instanceof RedirectError && error.redirect !== "" ? error.redirect : undefined;
    void this.reconnect(error, redirect);
  }

  private async reconnect(cause: Error, preferred: string | undefined): Promise<void> {
    if (this.reconnecting || this.closedError) return;
    this.reconnecting = true;
    const deadline = Date.now() + (this.options.failoverTimeoutMs ?? 30_000);
    let attempt = 0;
    let next = preferred;
    let lastError: Error = cause;
    let failed: string | undefined;
    /** Nodes that answered the resume with UNKNOWN_SESSION, and with NOT_PRIMARY, so far. */
    const unknownAt = new Set<string>();
    const standbyAt = new Set<string>();
    let unknown: Error | undefined;
    while (Date.now() < deadline && !this.closedError) {
      // A redirect back to the node that just failed is stale (its peer cannot know yet).
      if (next === failed) next = undefined;
      if (next === undefined) this.endpointIndex = (this.endpointIndex + 1) % this.endpoints.length;
      const endpoint = next ?? this.endpoints[this.endpointIndex]!;
      next = undefined;
      try {
        const conn = await connect(
          endpoint,
          {
            tenant: this.options.tenant,
            token: this.options.token,
            resumeSessionId: this.id,
            ...(this.options.clusterId !== undefined ? { clusterId: this.options.clusterId } : {}),
          },
          this.options.maxMessageBytes ?? 64 * 1024 * 1024,
          this.options.connectTimeoutMs ?? 1000,
          this.options.keepaliveMs,
          this.channel,
          this.options.maxStreamsPerConnection,
        );
        if (this.resume(conn)) return;
        drop(conn);
      } catch (e) {
        lastError = e as Error;
        const code = e instanceof SessionClosedError ? e.code : undefined;
        if (code === ErrorCode.UNKNOWN_SESSION || code === ErrorCode.SESSION_EXPIRED) {
          // A primary of an older epoch (peer mode, split brain) does not know a session the
          // other node serves, or reaped it alone: the session is lost only once no other node
          // can serve it. An expiry is the answer that says the most.
          unknownAt.add(endpoint);
          if (!(unknown instanceof SessionExpiredError)) unknown = lastError;
          failed = endpoint;
        } else if (code !== undefined && FATAL.has(code)) break;
        else if (e instanceof RedirectError && e.redirect !== "") next = e.redirect;
        else failed = endpoint;
        if (e instanceof RedirectError && code === ErrorCode.NOT_PRIMARY) standbyAt.add(endpoint);
        const lost = this.endpoints.every((x) => unknownAt.has(x) || standbyAt.has(x));
        if (unknown !== undefined && lost) {
          lastError = unknown;
          break;
        }
      }
      attempt++;
      // Failover happens on the scale of a lease: retry often, with jitter.
      const backoff = Math.min(this.options.retryMaxMs ?? 100, 10 * 2 ** Math.min(attempt, 12));
      await new Promise((r) => setTimeout(r, backoff * (0.5 + Math.random() / 2)));
    }
    this.reconnecting = false;
    this.fail(
      lastError instanceof SessionClosedError
        ? lastError
        : new SessionClosedError(
            ErrorCode.NOT_PRIMARY,
            `no node resumed the session: ${lastError.message}`,
          ),
    );
  }

  /** Takes a resumed stream if its node is not older and has not lost answered frames. */
  private resume(conn: Connection): boolean {
    const epoch = Number(conn.opened.epoch);
    if (epoch < this.epoch) return false; // a node from an older epoch: not to be believed
    const lastFrame = Number(conn.opened.lastFrame);
    const answered = this.window.settledThrough;
    this.reconnecting = false;
    if (lastFrame < answered) {
      drop(conn);
      this.fail(
        new SessionClosedError(
          ErrorCode.FRAME_OUT_OF_ORDER,
          `${conn.opened.nodeId} has frame ${lastFrame} but ${answered} were acknowledged: ${answered - lastFrame} lost (async failover)`,
        ),
      );
      return true;
    }
    this.epoch = epoch;
    this.nodeId = conn.opened.nodeId;
    // Reached by a redirect too: the next failover starts from the other endpoint, not from
    // this one (found by the chaos harness: a stale index sent sessions back to a paused node).
    const index = this.endpoints.indexOf(conn.endpoint);
    if (index >= 0) this.endpointIndex = index;
    this.resumes++;
    this.attach(conn);
    this.window.rewind();
    this.send();
    return true;
  }

  // ---- raw frames ----

  /**
   * Sends one call; resolves with its result whatever the code. The call is checked and its
   * data copied now, so the caller may reuse its buffers at once.
   */
  call(call: Call): Promise<CallResult> {
    this.flushStores();
    const owned: Call =
      call.op === "dmaWrite" ? { ...call, data: Uint8Array.prototype.slice.call(call.data) } : call;
    return this.enqueue({ kind: "call", call: owned });
  }

  /** Sends one store batch as a frame (after any pending mapped-buffer stores); its result. */
  storeBatch(batch: StoreBatch): Promise<CallResult> {
    this.flushStores();
    return this.enqueue({ kind: "stores", batch });
  }

  private enqueue(body: Parameters<FrameWindow["push"]>[0]): Promise<CallResult> {
    if (this.closedError) return Promise.reject(this.closedError);
    const invalid = body.kind === "call" ? invalidCall(body.call) : invalidStores(body.batch);
    if (invalid !== null) return Promise.reject(new VgpuError(ErrorCode.MALFORMED, invalid));
    const result = this.window.push(body);
    this.scheduleSend();
    return result;
  }

  private scheduleSend(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      this.flushStores();
      this.send();
    });
  }

  private send(): void {
    const conn = this.conn;
    if (conn === undefined) return;
    const budget = (this.options.maxMessageBytes ?? 64 * 1024 * 1024) / 2;
    for (;;) {
      const room = Math.min(this.maxPerMessage, this.maxInFlight - this.window.inFlight);
      if (room <= 0) return;
      // Several frames per message, but never more bytes than half the message limit (a
      // resend after failover may find many large frames waiting).
      const frames = this.window.takeUnsent(room, budget, frameBytes);
      if (frames.length === 0) return;
      conn.stream.write(
        create(wire.GuestMessageSchema, {
          kind: { case: "frames", value: { frames: frames.map(encodeFrame) } },
        }),
      );
    }
  }

  private onMessage(conn: Connection, m: wire.NodeMessage): void {
    if (this.conn !== conn) return;
    switch (m.kind.case) {
      case "acks": {
        const epoch = Number(m.kind.value.epoch);
        if (epoch < this.epoch) return; // a reply from an older epoch is never believed
        this.epoch = epoch;
        for (const r of m.kind.value.results) {
          this.window.settle(Number(r.frame), decodeResult(r.result));
        }
        this.send();
        return;
      }
      case "error": {
        const { code, message, redirect } = m.kind.value;
        this.lost(conn, nodeError(code, message, redirect));
        return;
      }
      case "closed":
        this.fail(new SessionClosedError(ErrorCode.OK, "session closed"));
        return;
      default:
        return;
    }
  }

  private fail(error: Error): void {
    if (this.closedError) return;
    this.closedError = error;
    this.window.failAll(error);
    if (this.conn) drop(this.conn);
    this.conn = undefined;
  }

  // ---- typed calls: resolve with the output, reject with a VgpuError ----

  private async expectOk(call: Call): Promise<CallResult> {
    const result = await this.call(call);
    if (result.code !== ErrorCode.OK) throw new VgpuError(result.code, result.message);
    return result;
  }

  private async expectHandle(call: Call): Promise<number> {
    const r = await this.expectOk(call);
    if (r.output.kind !== "handle") throw new VgpuError(ErrorCode.MALFORMED, "no handle in reply");
    return r.output.handle;
  }

  createContext(): Promise<number> {
    return this.expectHandle({ op: "contextCreate" });
  }

  async destroyContext(context: number): Promise<void> {
    await this.expectOk({ op: "contextDestroy", context });
  }

  allocBo(context: number, sizeBytes: number): Promise<number> {
    return this.expectHandle({ op: "boAlloc", context, sizeBytes });
  }

  async freeBo(context: number, bo: number): Promise<void> {
    await this.expectOk({ op: "boFree", context, bo });
  }

  async dmaWrite(context: number, bo: number, offset: number, data: Uint8Array): Promise<void> {
    await this.expectOk({ op: "dmaWrite", context, bo, offset, data });
  }

  async dmaRead(context: number, bo: number, offset: number, length: number): Promise<Uint8Array> {
    const r = await this.expectOk({ op: "dmaRead", context, bo, offset, length });
    if (r.output.kind !== "data") throw new VgpuError(ErrorCode.MALFORMED, "no data in reply");
    return r.output.data;
  }

  async copy(
    context: number,
    src: { bo: number; offset: number },
    dst: { bo: number; offset: number },
    length: number,
  ): Promise<void> {
    await this.expectOk({
      op: "boCopy",
      context,
      srcBo: src.bo,
      srcOffset: src.offset,
      dstBo: dst.bo,
      dstOffset: dst.offset,
      length,
    });
  }

  async launch(context: number, kernel: string, args: readonly KernelArg[]): Promise<void> {
    await this.expectOk({ op: "kernelLaunch", context, kernel, args });
  }

  async fence(context: number): Promise<number> {
    const r = await this.expectOk({ op: "fence", context });
    if (r.output.kind !== "fence") throw new VgpuError(ErrorCode.MALFORMED, "no fence in reply");
    return r.output.value;
  }

  /** Maps a buffer and returns an object written like memory; writes become store frames. */
  async map(context: number, bo: number, sizeBytes: number): Promise<MappedBuffer> {
    await this.expectOk({ op: "boMap", context, bo });
    const mapped = new MappedBuffer(this, context, bo, sizeBytes);
    this.mapped.add(mapped);
    return mapped;
  }

  async unmap(mapped: MappedBuffer): Promise<void> {
    await mapped.flush();
    this.mapped.delete(mapped);
    await this.expectOk({ op: "boUnmap", context: mapped.context, bo: mapped.bo });
  }

  /** Called by mapped buffers when they hold stores: send them soon. */
  storesPending(): void {
    this.scheduleSend();
  }

  /** Turns every mapped buffer's pending stores into frames, before anything after them. */
  private flushStores(): void {
    for (const m of this.mapped) m.emit();
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
    const done = new Promise<void>((resolve) => {
      conn.stream.on("data", (m: wire.NodeMessage) => {
        if (m.kind.case === "closed") resolve();
      });
      conn.stream.on("end", () => resolve());
      conn.stream.on("error", () => resolve());
    });
    conn.stream.write(create(wire.GuestMessageSchema, { kind: { case: "close", value: {} } }));
    conn.stream.end();
    await done;
    this.fail(new SessionClosedError(ErrorCode.OK, "session closed"));
  }
}

/** About the bytes a frame takes on the wire. */
function frameBytes(body: Parameters<FrameWindow["push"]>[0]): number {
  if (body.kind === "stores")
    return 32 + body.batch.data.byteLength + 5 * body.batch.offsets.length;
  return 64 + (body.call.op === "dmaWrite" ? body.call.data.byteLength : 0);
}

export const buf = (bo: number): KernelArg => ({ kind: "buffer", bo });
export const u32 = (value: number): KernelArg => ({ kind: "u32", value: value >>> 0 });
export const i32 = (value: number): KernelArg => ({ kind: "i32", value: value | 0 });
export const f32 = (value: number): KernelArg => ({ kind: "f32", value: Math.fround(value) });
