// The guest's gRPC edge: the dialer port over grpc-js (a stream on a pooled connection), TLS
// credentials for the guest port, and the errors a node's refusal becomes.
import * as grpc from "@grpc/grpc-js";
import { certificateNames, ErrorCode, encodeGuestFrames, type wire } from "@vgpu-ha/common";
import { type PooledClient, pooledClient } from "./channel-pool.js";
import type { NodeRefusal } from "./core/session-machine.js";
import { SessionClosedError, SessionExpiredError } from "./errors.js";
import type { NodeStream, NodeStreamHandlers } from "./ports.js";

type Duplex = grpc.ClientDuplexStream<wire.GuestMessage, wire.NodeMessage>;

/** A SessionClosedError that names where to go instead (NOT_PRIMARY with a redirect). */
export class RedirectError extends SessionClosedError {
  readonly redirect: string;
  constructor(code: ErrorCode, message: string, redirect: string) {
    super(code, message);
    this.redirect = redirect;
  }
}

/**
 * Why a session failed, as the error to raise: a node's answer is a RedirectError (naming where
 * to go, if anywhere), SESSION_EXPIRED a SessionExpiredError, the transport's a SessionClosedError.
 */
export function refusalError(r: NodeRefusal): SessionClosedError {
  if (r.code === ErrorCode.SESSION_EXPIRED) return new SessionExpiredError(r.message);
  return r.answered
    ? new RedirectError(r.code, r.message, r.redirect)
    : new SessionClosedError(r.code, r.message);
}

/** TLS to the guest port: the CA to trust, a client certificate, the server's expected name. */
export interface GuestTls {
  /** PEM of the CA that signed the nodes' certificates. */
  readonly ca: string | Buffer;
  /** PEM of this guest's certificate and key (for a node with guest.tls mutual, or a tenant known by its certificate). */
  readonly cert?: string | Buffer;
  readonly key?: string | Buffer;
  /**
   * The name the node's certificate must carry (CN or DNS subjectAltName); default: the host
   * of the endpoint, checked the usual way.
   */
  readonly serverName?: string;
}

/** How a guest dials: plaintext, or TLS with `tls`. */
export function guestChannel(tls: GuestTls | undefined): {
  credentials: grpc.ChannelCredentials;
  options: grpc.ChannelOptions;
} {
  if (tls === undefined) return { credentials: grpc.credentials.createInsecure(), options: {} };
  const pem = (v: string | Buffer | undefined) =>
    v === undefined ? null : Buffer.isBuffer(v) ? v : Buffer.from(v);
  const name = tls.serverName;
  const credentials = grpc.credentials.createSsl(
    pem(tls.ca),
    pem(tls.key),
    pem(tls.cert),
    name === undefined
      ? {}
      : {
          checkServerIdentity: (_host, cert) => {
            const names = certificateNames(cert);
            return names.includes(name)
              ? undefined
              : new Error(`node certificate names ${names.join(", ") || "nothing"}, not ${name}`);
          },
        },
  );
  return {
    credentials,
    options: name === undefined ? {} : { "grpc.ssl_target_name_override": name },
  };
}

/** How the library dials a node: a guest stream on a pooled HTTP/2 connection (channel-pool.ts). */
export interface GrpcDialOptions {
  readonly maxMessageBytes: number;
  /** Ping interval (and timeout) that ends a stream whose node stopped answering. */
  readonly keepaliveMs?: number;
  readonly channel?: ReturnType<typeof guestChannel>;
  readonly streamsPerConnection?: number | undefined;
  /** HTTP/2 receive window of each connection and stream; DEFAULT_RECEIVE_WINDOW_BYTES if left out. */
  readonly receiveWindowBytes?: number;
}

/**
 * The guest's HTTP/2 receive window (grpc-js's grpc-node.flow_control_window: each stream's and
 * the connection's). HTTP/2's default, 64 KiB, would cost a dma_read reply of 64 KiB or more a
 * WINDOW_UPDATE round trip per 64 KiB.
 */
export const DEFAULT_RECEIVE_WINDOW_BYTES = 4 * 1024 * 1024;

/** The SessionPorts dialer over grpc-js: each stream takes a place on a pooled connection. */
export function grpcDialer(options: GrpcDialOptions): (endpoint: string) => NodeStream {
  const channel = options.channel ?? guestChannel(undefined);
  const keepaliveMs = options.keepaliveMs ?? 500;
  return (endpoint) => {
    const pooled = pooledClient(
      endpoint,
      channel.credentials,
      {
        ...channel.options,
        "grpc.max_receive_message_length": options.maxMessageBytes,
        "grpc.max_send_message_length": options.maxMessageBytes,
        // A node that stops answering HTTP/2 pings (paused, host frozen) ends the stream, so the
        // session fails over instead of waiting on an open but silent connection.
        "grpc.keepalive_time_ms": keepaliveMs,
        "grpc.keepalive_timeout_ms": keepaliveMs,
        "grpc.keepalive_permit_without_calls": 1,
        "grpc.initial_reconnect_backoff_ms": 100,
        "grpc.max_reconnect_backoff_ms": 1000,
        "grpc-node.flow_control_window": options.receiveWindowBytes ?? DEFAULT_RECEIVE_WINDOW_BYTES,
      },
      options.streamsPerConnection,
    );
    return grpcNodeStream(pooled, pooled.client.session());
  };
}

function grpcNodeStream(pooled: PooledClient, stream: Duplex): NodeStream {
  let handlers: NodeStreamHandlers | undefined;
  let cancelled = false;
  stream.on("data", (m: wire.NodeMessage) => handlers?.message(m));
  stream.on("error", (e: Error) => handlers?.closed(e.message));
  stream.on("end", () => handlers?.closed("stream ended"));
  return {
    send: (m) => {
      // Frames go as their bytes, encoded with each dma_write's data copied once (the
      // serializer passes bytes through); the rest through the generated code.
      stream.write(
        m.kind.case === "frames"
          ? (encodeGuestFrames(m.kind.value.frames) as unknown as wire.GuestMessage)
          : m,
      );
    },
    end: () => {
      stream.end();
    },
    cancel: () => {
      if (cancelled) return;
      cancelled = true;
      handlers = undefined;
      stream.removeAllListeners("data");
      stream.on("error", () => undefined); // the cancel reports CANCELLED; nobody listens
      stream.cancel();
      pooled.release();
    },
    listen: (h) => {
      handlers = h;
    },
    full: (limit) => pooled.full(limit),
  };
}
