// The daemon's snapshot pull over gRPC, both ends. The standby dials its primary's
// replication port (peer.replicationAddress, the same mutual-TLS channel settings as the
// replication stream) and calls PullSnapshot as a client with a large HTTP/2 receive window
// (grpc-node.flow_control_window: a grpc-js server cannot raise its own 64 KiB one, a client
// can), so the chunks in flight are never held back by WINDOW_UPDATE round trips. The primary
// writes the chunks to that server stream (SnapshotOutlet).
import * as grpc from "@grpc/grpc-js";
import {
  createClient,
  decodePrimaryMessage,
  decodeStandbyMessage,
  type ErrorCode,
  encodePrimaryMessage,
  encodePulledChunk,
  encodeStandbyMessage,
  grpcStatusOf,
  type PeerChannel,
  type PrimaryMessage,
  type ServiceClient,
  type StandbyMessage,
  wire,
} from "@vgpu-ha/common";
import type { PullStream } from "@vgpu-ha/primary";
import type { SnapshotPullPort } from "@vgpu-ha/standby";

export type PullCall = grpc.ServerWritableStream<wire.StandbyMessage, wire.PrimaryMessage>;

/** The receive window at least: two windows of chunks in flight, within HTTP/2's 2^31 − 1. */
const PULL_WINDOW_MIN_BYTES = 16 * 1024 ** 2;
const HTTP2_WINDOW_MAX_BYTES = 2 ** 31 - 1;

/** The HTTP/2 receive window a pull asks for: the Sender's whole window twice over. */
export function pullWindowBytes(chunkBytes: number, windowChunks: number): number {
  const wanted = Math.max(PULL_WINDOW_MIN_BYTES, 2 * chunkBytes * windowChunks);
  return Math.min(HTTP2_WINDOW_MAX_BYTES, wanted);
}

export interface PullClientOptions {
  /** The primary's replication address (peer.replicationAddress). */
  readonly address: string;
  readonly channel?: PeerChannel;
  readonly maxMessageBytes: number;
  readonly windowBytes: number;
}

/**
 * The standby's port: one client for the role's life, warmed (connected) when the primary's
 * first message arrives, so a snapshot's first pull does not wait for a connection; each pull
 * is a call on it. A broken connection is made again by grpc-js at the next pull.
 */
export function grpcPullPort(o: PullClientOptions): SnapshotPullPort {
  let client: ServiceClient<typeof wire.Replication> | undefined;
  const connected = (): ServiceClient<typeof wire.Replication> => {
    client ??= createClient(
      wire.Replication,
      o.address,
      o.channel?.credentials ?? grpc.credentials.createInsecure(),
      {
        ...o.channel?.options,
        "grpc.max_receive_message_length": o.maxMessageBytes,
        "grpc.max_send_message_length": o.maxMessageBytes,
        "grpc-node.flow_control_window": o.windowBytes,
      },
    );
    return client;
  };
  return {
    warm() {
      connected().getChannel().getConnectivityState(true); // true: connect now
    },
    close() {
      client?.close();
      client = undefined;
    },
    open(request, deliver, done) {
      const call = connected().pullSnapshot(encodeStandbyMessage(request));
      let finished = false;
      const finish = (reason: string) => {
        if (finished) return;
        finished = true;
        done(reason);
      };
      call.on("data", (w: wire.PrimaryMessage) => {
        const m = decodePrimaryMessage(w);
        if (m instanceof Error) {
          call.cancel();
          finish(`malformed message: ${m.message}`);
        } else deliver(withOwnedPages(m));
      });
      call.on("error", (e: grpc.ServiceError) => finish(e.details || e.message));
      call.on("end", () => finish(""));
      return () => {
        if (finished) return;
        call.cancel();
        finish("cancelled");
      };
    },
  };
}

/** Room in a receive buffer beyond the pages: grpc's prefix, the leading fields, run heads. */
const OWN_SLACK_BYTES = 64;
const RUN_HEAD_BYTES_MAX = 32;

/**
 * A pulled chunk marked pagesOwned when its pages view a receive buffer that holds this
 * message alone: grpc-js joins each message it receives into a Buffer of its own (larger than
 * Node's shared 8 KiB pool, never reused), so the standby's device may take that buffer rather
 * than copy the pages (snapshot-sink.ts). Anything else (pages in several buffers, a buffer
 * with room for more than this message, shared memory) is copied as before.
 */
export function withOwnedPages(m: PrimaryMessage): PrimaryMessage {
  if (m.kind !== "snapshot" || m.chunk.pages.length === 0) return m;
  const buffer = m.chunk.pages[0]!.data.buffer;
  if (!(buffer instanceof ArrayBuffer) || buffer.byteLength <= Buffer.poolSize) return m;
  let bytes = OWN_SLACK_BYTES;
  for (const p of m.chunk.pages) {
    if (p.data.buffer !== buffer) return m;
    bytes += p.data.byteLength + RUN_HEAD_BYTES_MAX;
  }
  if (buffer.byteLength > bytes) return m;
  return { ...m, chunk: { ...m.chunk, pagesOwned: true } };
}

function pulledMessage(m: PrimaryMessage): wire.PrimaryMessage {
  if (m.kind !== "snapshot" || m.chunk.meta !== undefined) return encodePrimaryMessage(m);
  return encodePulledChunk(m.epoch, m.chunk) as unknown as wire.PrimaryMessage;
}

/** The primary's end of one pull: the request and the stream the outlet writes to. */
export function pullStreamOf(call: PullCall): {
  request: StandbyMessage | Error;
  stream: PullStream;
} {
  const handlers: (() => void)[] = [];
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    for (const h of handlers) h();
  };
  call.on("cancelled", close);
  call.on("close", close);
  call.on("error", close);
  call.on("finish", close);
  const stream: PullStream = {
    // Pages are encoded at once into one buffer (snapshot-pages-encode.ts); the service
    // adapter's serializer passes encoded bytes through.
    write: (m) => !closed && call.write(pulledMessage(m)),
    end: () => {
      if (!closed) call.end();
    },
    fail: (code: ErrorCode, message: string) => {
      if (closed) return;
      call.emit("error", { code: grpcStatusOf(code), details: message });
      close();
    },
    onClose: (h) => handlers.push(h),
  };
  return { request: decodeStandbyMessage(call.request), stream };
}
