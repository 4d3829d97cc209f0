// The guest port's own TCP listener in front of grpc-js (plaintext and TLS alike), so that the
// node does its per-source accounting itself: every accepted socket is counted by source
// address (GuestGuard, a pure core), refused at once while its source is penalised or holds
// too many connections, and handed to grpc-js through the server's connection injector. The
// HTTP/2 session grpc-js builds on each socket is watched for new streams: a connection that
// opens them faster than its bucket allows (HTTP/2 rapid reset, a flood of opens) gets GOAWAY
// ENHANCE_YOUR_CALM, its socket is destroyed and its source penalised, so reconnecting does not
// help it. The open streams of each connection are counted for the stream limit (streamsOf).
// A connection that carries no stream within the first-stream timeout is closed, and what the
// streams' gRPC decoders hold is bounded by guest-memory.ts.
import { type Http2Server, constants as h2, type ServerHttp2Session } from "node:http2";
import { createServer as createNetServer, type Server, type Socket } from "node:net";
import { create } from "@bufbuild/protobuf";
import type * as grpc from "@grpc/grpc-js";
import { ErrorCode, invariant, wire } from "@vgpu-ha/common";
import type { GuardedConnection, GuestGuard, IncompleteMessageLimits } from "@vgpu-ha/primary";
import { boundIncompleteMessages } from "./guest-memory.js";
import { listenOn } from "./listen-on.js";
import { rateLimitedWarn, type WarnLog } from "./refusal-log.js";
import type { GuestStream } from "./roles/role.js";
import { createTlsServer, type TlsPortOptions } from "./tls-listener.js";

/** Why the guest listener refused or closed something (vgpu_guest_refusals_total{reason}). */
export type GuestRefusalReason =
  | "penalty"
  | "connections_per_source"
  | "stream_rate"
  | "early_reset"
  | "stream_limit"
  | "open_timeout"
  | "auth"
  | "wrong_cluster"
  | "protocol_error"
  | "incomplete_bytes";

export interface GuestRefusal {
  /** ip:port of the connection. */
  readonly remote: string;
  /** The tenant as the guest gave it (auth refusals). */
  readonly tenant?: string;
  readonly detail?: string;
}

export type GuestRefusalSink = (reason: GuestRefusalReason, refusal: GuestRefusal) => void;

export interface GuestListenerOptions {
  readonly guard: GuestGuard;
  /** Monotonic milliseconds. */
  readonly nowMs: () => number;
  readonly onRefused: GuestRefusalSink;
  /**
   * A connection that has opened no stream this long after it was accepted is closed
   * (guest.openTimeoutMs): bytes that never become an HTTP/2 stream — a preface never finished,
   * frames nghttp2 refused and a half-close after them — no longer hold it open. None if left out.
   */
  readonly firstStreamTimeoutMs?: number;
  readonly tls?: TlsPortOptions;
  /** Budgets of bytes held in incomplete gRPC messages (guest-memory.ts); unbounded if left out. */
  readonly incomplete?: IncompleteMessageLimits;
}

/** A stream reset by the guest sooner than this after it opened counts as an early reset. */
const EARLY_RESET_MS = 1000;

/** An abuser's socket is destroyed at the latest this long after its GOAWAY. */
const GOAWAY_GRACE_MS = 20;

interface Conn {
  readonly guarded: GuardedConnection;
  /** The TCP socket; with TLS, the TLS socket over it once its handshake is done. */
  socket: Socket;
  readonly remote: string;
  session: ServerHttp2Session | undefined;
  openStreams: number;
  /** Whether it has carried a stream. */
  streamed: boolean;
  abused: boolean;
}

export interface GuestListener {
  readonly port: number;
  /** Open HTTP/2 streams of the connection whose peer (ip:port, as grpc-js's getPeer) is given. */
  streamsOf(peer: string): number;
  /** Bytes held in incomplete gRPC messages of guest streams now (0 without a bound). */
  incompleteBytes(): number;
  close(): void;
}

export async function listenGuest(
  listen: string,
  injector: grpc.ConnectionInjector,
  http2: Http2Server,
  options: GuestListenerOptions,
): Promise<GuestListener> {
  const { guard, nowMs, onRefused } = options;
  const conns = new Map<string, Conn>();
  /** The connection being injected: grpc-js's http2 server makes its session synchronously. */
  let injecting: Conn | undefined;
  // Registered after grpc-js's own handler: it sees each stream once grpc-js has taken it.
  const incomplete = options.incomplete
    ? boundIncompleteMessages(http2, options.incomplete, onRefused)
    : undefined;

  const abuse = (c: Conn, reason: "stream_rate" | "early_reset") => {
    if (c.abused) return;
    c.abused = true;
    onRefused(reason, { remote: c.remote });
    // GOAWAY goes out; close() makes HTTP/2 refuse the abuser's further streams without making
    // them into streams for us (destroying at once could drop the GOAWAY before it was
    // written: seen on Node 22); the session and socket go after a short grace.
    c.session?.goaway(h2.NGHTTP2_ENHANCE_YOUR_CALM);
    c.session?.close();
    setTimeout(() => {
      c.session?.destroy();
      c.socket.destroy();
    }, GOAWAY_GRACE_MS).unref();
  };
  http2.on("session", (session: ServerHttp2Session) => {
    const c = injecting;
    if (c === undefined) return;
    c.session = session;
    // Bytes that are not HTTP/2 (garbage, another protocol): nghttp2 fails the session.
    session.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code?.startsWith("ERR_HTTP2")) {
        onRefused("protocol_error", { remote: c.remote, detail: e.code });
      }
    });
    session.prependListener("stream", (stream) => {
      c.openStreams++;
      c.streamed = true;
      const openedMs = nowMs();
      stream.once("close", () => {
        c.openStreams--;
        // Reset within EARLY_RESET_MS of opening it: the mark of HTTP/2 rapid reset. A guest
        // ends a session with Close and a half-close (NO_ERROR), and cancels a stream rarely;
        // grpc-js answers each stream's headers at once, so "before any answer" never holds.
        const now = nowMs();
        // A stream the node reset itself (incomplete_bytes) is not the guest's reset.
        const reset =
          (stream.rstCode ?? 0) !== h2.NGHTTP2_NO_ERROR && !incomplete?.resetByNode(stream);
        const early = reset && now - openedMs < EARLY_RESET_MS;
        if (early && !c.abused && !guard.earlyReset(c.guarded, now)) abuse(c, "early_reset");
      });
      if (!c.abused && !guard.newStream(c.guarded, nowMs())) abuse(c, "stream_rate");
    });
  });
  const inject = (c: Conn) => {
    injecting = c;
    try {
      injector.injectConnection(c.socket);
    } finally {
      injecting = undefined;
    }
    invariant(c.session !== undefined || c.socket.destroyed, "grpc-js made no HTTP/2 session");
  };
  /** Counts a new TCP connection; false (and the socket destroyed) when it is refused. */
  const accept = (socket: Socket): Conn | undefined => {
    const source = socket.remoteAddress ?? "?";
    const remote = `${source}:${socket.remotePort ?? "?"}`;
    const verdict = guard.accept(source, nowMs());
    if (typeof verdict === "string") {
      socket.destroy();
      onRefused(verdict, { remote });
      return undefined;
    }
    const c: Conn = {
      guarded: verdict,
      socket,
      remote,
      session: undefined,
      openStreams: 0,
      streamed: false,
      abused: false,
    };
    conns.set(remote, c);
    const firstStream =
      options.firstStreamTimeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            // Judged after the event loop has read the sockets once more: a busy loop runs
            // timers before it reads the stream that may be waiting.
            setImmediate(() => {
              if (c.streamed || c.socket.destroyed) return;
              onRefused("open_timeout", { remote, detail: "no HTTP/2 stream" });
              c.session?.destroy();
              c.socket.destroy();
              socket.destroy();
            });
          }, options.firstStreamTimeoutMs).unref();
    socket.once("close", () => {
      clearTimeout(firstStream);
      guard.closed(verdict);
      if (conns.get(remote) === c) conns.delete(remote);
    });
    socket.on("error", () => undefined); // a peer that resets: the session sees the close
    return c;
  };

  let server: Server;
  if (options.tls) {
    const tlsServer = createTlsServer(options.tls, (secure) => {
      const c = conns.get(`${secure.remoteAddress}:${secure.remotePort}`);
      // The TLS socket stands for the TCP one from now on (grpc-js reads its peer from it).
      if (c === undefined) {
        secure.destroy();
        return;
      }
      c.socket = secure;
      inject(c);
    });
    // Our accounting runs first, on the raw TCP socket, before any TLS work.
    const handshake = tlsServer.listeners("connection") as ((s: Socket) => void)[];
    tlsServer.removeAllListeners("connection");
    tlsServer.on("connection", (socket: Socket) => {
      if (accept(socket) === undefined) return;
      for (const l of handshake) l.call(tlsServer, socket);
    });
    server = tlsServer;
  } else {
    server = createNetServer({ noDelay: true }, (socket) => {
      const c = accept(socket);
      if (c !== undefined) inject(c);
    });
  }
  const port = await listenOn(server, listen);
  return {
    port,
    streamsOf: (peer) => conns.get(peer)?.openStreams ?? 0,
    incompleteBytes: () => incomplete?.totalBytes() ?? 0,
    close: () => server.close(),
  };
}

/**
 * What a node does with a guest refusal: count it (vgpu_guest_refusals_total{reason}) and log
 * it at warn, at most one line a second per reason (with how many were left out since). The
 * message is stable for fail2ban: `guest refused: <reason> from <address>`.
 */
export function guestRefusalReporter(
  log: WarnLog,
  count: (reason: GuestRefusalReason) => void,
  nowMs: () => number = () => performance.now(),
): GuestRefusalSink {
  const report = rateLimitedWarn(log, 1000, nowMs);
  return (reason, refusal) => {
    count(reason);
    const source = refusal.remote.slice(0, refusal.remote.lastIndexOf(":"));
    report(reason, { ...refusal, reason, source }, `guest refused: ${reason} from ${source}`);
  };
}

/**
 * Wraps the guest port's handler: a stream that arrives on a connection already holding
 * `limit` streams is answered LIMIT_EXCEEDED, naming the limit (SessionError.stream_limit),
 * and ended, so the guest opens it on another connection instead of waiting.
 */
export function withStreamLimit(
  limit: number,
  streamsOf: (peer: string) => number,
  onRefused: GuestRefusalSink,
  serve: (stream: GuestStream) => void,
): (stream: GuestStream) => void {
  return (stream) => {
    const peer = stream.getPeer();
    const open = streamsOf(peer);
    if (open <= limit) {
      serve(stream);
      return;
    }
    onRefused("stream_limit", { remote: peer, detail: `${open} streams open` });
    stream.on("error", () => undefined);
    stream.write(
      create(wire.NodeMessageSchema, {
        kind: {
          case: "error",
          value: {
            code: ErrorCode.LIMIT_EXCEEDED,
            message: `this connection has ${limit} streams open, the most guest.maxStreamsPerConnection allows: open the session on another connection`,
            streamLimit: limit,
          },
        },
      }),
    );
    stream.end();
  };
}
