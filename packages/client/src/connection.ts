// One gRPC stream to one node for a session: open (or resume) it and wait for Opened.
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { certificateNames, ErrorCode, wire } from "@vgpu-ha/common";
import { type PooledClient, pooledClient } from "./channel-pool.js";
import { SessionClosedError, SessionExpiredError } from "./errors.js";

export type Duplex = grpc.ClientDuplexStream<wire.GuestMessage, wire.NodeMessage>;

export interface Connection {
  readonly endpoint: string;
  /** The session's place on a pooled HTTP/2 connection (channel-pool.ts). */
  readonly pooled: PooledClient;
  readonly stream: Duplex;
  readonly opened: wire.Opened;
}

/** A stream refused because its connection is at the node's stream limit is retried this often. */
const STREAM_LIMIT_RETRIES = 8;

/** A SessionClosedError that names where to go instead (NOT_PRIMARY with a redirect). */
export class RedirectError extends SessionClosedError {
  readonly redirect: string;
  constructor(code: ErrorCode, message: string, redirect: string) {
    super(code, message);
    this.redirect = redirect;
  }
}

/** A node's session error as the error to raise: SESSION_EXPIRED is a SessionExpiredError. */
export function nodeError(code: ErrorCode, message: string, redirect: string): SessionClosedError {
  if (code === ErrorCode.SESSION_EXPIRED) return new SessionExpiredError(message);
  return new RedirectError(code, message, redirect);
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

export interface OpenRequest {
  readonly tenant: string;
  readonly token: string;
  readonly resumeSessionId?: string;
  /** The cluster id the guest expects; a node of another answers WRONG_CLUSTER. */
  readonly clusterId?: string;
}

/**
 * Opens (or resumes) a session on a pooled connection to `endpoint` and waits for Opened. A
 * stream the node refuses because its connection is at guest.maxStreamsPerConnection is opened
 * again on another connection (the pool learns the limit).
 */
export async function connect(
  endpoint: string,
  open: OpenRequest,
  maxMessageBytes: number,
  timeoutMs: number,
  keepaliveMs = 500,
  channel = guestChannel(undefined),
  streamsPerConnection?: number,
): Promise<Connection> {
  for (let attempt = 0; ; attempt++) {
    const pooled = pooledClient(
      endpoint,
      channel.credentials,
      {
        ...channel.options,
        "grpc.max_receive_message_length": maxMessageBytes,
        "grpc.max_send_message_length": maxMessageBytes,
        // A node that stops answering HTTP/2 pings (paused, host frozen) ends the stream, so the
        // session fails over instead of waiting on an open but silent connection.
        "grpc.keepalive_time_ms": keepaliveMs,
        "grpc.keepalive_timeout_ms": keepaliveMs,
        "grpc.keepalive_permit_without_calls": 1,
        "grpc.initial_reconnect_backoff_ms": 100,
        "grpc.max_reconnect_backoff_ms": 1000,
      },
      streamsPerConnection,
    );
    try {
      return await openOn(endpoint, pooled, open, timeoutMs);
    } catch (e) {
      if (!(e instanceof StreamLimitError) || attempt >= STREAM_LIMIT_RETRIES) throw e;
      pooled.full(e.streamLimit);
    }
  }
}

/** LIMIT_EXCEEDED for a stream over the connection's stream limit (SessionError.stream_limit). */
class StreamLimitError extends RedirectError {
  readonly streamLimit: number;
  constructor(message: string, streamLimit: number) {
    super(ErrorCode.LIMIT_EXCEEDED, message, "");
    this.streamLimit = streamLimit;
  }
}

async function openOn(
  endpoint: string,
  pooled: PooledClient,
  open: OpenRequest,
  timeoutMs: number,
): Promise<Connection> {
  const stream = pooled.client.session();
  stream.write(create(wire.GuestMessageSchema, { kind: { case: "open", value: open } }));
  try {
    const opened = await new Promise<wire.Opened>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new SessionClosedError(
              ErrorCode.NOT_PRIMARY,
              `${endpoint}: no answer in ${timeoutMs} ms`,
            ),
          ),
        timeoutMs,
      );
      const onData = (m: wire.NodeMessage) => {
        cleanup();
        if (m.kind.case === "opened") resolve(m.kind.value);
        else if (m.kind.case === "error") {
          const { code, message, redirect, streamLimit } = m.kind.value;
          reject(
            code === ErrorCode.LIMIT_EXCEEDED && streamLimit > 0
              ? new StreamLimitError(`${endpoint}: ${message}`, streamLimit)
              : nodeError(code, `${endpoint}: ${message}`, redirect),
          );
        } else reject(new SessionClosedError(ErrorCode.MALFORMED, `unexpected ${m.kind.case}`));
      };
      const onError = (e: Error) => {
        cleanup();
        reject(new SessionClosedError(ErrorCode.NOT_PRIMARY, `${endpoint}: ${e.message}`));
      };
      const onEnd = () => onError(new Error("stream ended"));
      const cleanup = () => {
        clearTimeout(timer);
        stream.off("data", onData);
        stream.off("error", onError);
        stream.off("end", onEnd);
      };
      stream.on("data", onData);
      stream.on("error", onError);
      stream.on("end", onEnd);
    });
    return { endpoint, pooled, stream, opened };
  } catch (e) {
    drop({ pooled, stream });
    throw e;
  }
}

/** Ends a connection's stream without caring how, and gives back its place on the connection. */
export function drop(conn: { pooled: PooledClient; stream: Duplex }): void {
  conn.stream.removeAllListeners("data");
  conn.stream.on("error", () => undefined); // the cancel reports CANCELLED; nobody listens
  conn.stream.cancel();
  conn.pooled.release();
}
