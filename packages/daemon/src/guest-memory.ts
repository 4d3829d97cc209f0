// The guest port's bound on what incomplete gRPC messages make the node hold. grpc-js reads
// each stream into its StreamDecoder until it holds a whole message, and the HTTP/2 windows do
// not stop it (Node hands a window back as grpc-js reads), so without this one message whose
// prefix announces guest.maxMessageBytes and whose bytes never finish holds up to that much for
// as long as its stream lives, on every stream of every connection (and keeps the pieces of a
// whole message until the next one begins). Here every guest stream's bytes are read a second
// time, beside grpc-js, by a listener that only counts (the accounting is the pure
// IncompleteMessages of @vgpu-ha/primary: the read buffers each decoder keeps alive); a stream
// past a budget is reset with
// RST_STREAM ENHANCE_YOUR_CALM (the guest sees gRPC RESOURCE_EXHAUSTED), counted and logged as
// a guest refusal (reason "incomplete_bytes"). See docs/security.md.
//
// The second 'data' listener is attached after grpc-js's own, once grpc-js has paused or
// resumed the stream (readableFlowing no longer null): adding a listener then changes nothing
// of grpc-js's pause/resume (Readable.on('data') resumes only a stream never paused or
// resumed). A stream grpc-js did not take (it answered it at once: an unknown method, another
// content type) is not read by anyone and holds at most its stream window.
import { type Http2Server, constants as h2, type ServerHttp2Stream } from "node:http2";
import {
  type IncompleteMessageLimits,
  IncompleteMessages,
  type TrackedStream,
} from "@vgpu-ha/primary";
import type { GuestRefusalSink } from "./guest-listener.js";

export interface IncompleteMessageBound {
  /** Bytes held in incomplete messages now, node-wide. */
  totalBytes(): number;
  /** Whether the node (this bound) reset the stream: not a reset by the guest. */
  resetByNode(stream: ServerHttp2Stream): boolean;
}

export function boundIncompleteMessages(
  http2: Http2Server,
  limits: IncompleteMessageLimits,
  onRefused: GuestRefusalSink,
): IncompleteMessageBound {
  const accounting = new IncompleteMessages(limits);
  const streams = new Map<TrackedStream, ServerHttp2Stream>();
  const reset = new WeakSet<ServerHttp2Stream>();

  http2.on("stream", (stream: ServerHttp2Stream) => {
    if (stream.readableFlowing === null || stream.destroyed) return;
    const socket = stream.session?.socket;
    const source = socket?.remoteAddress ?? "?";
    const tracked = accounting.add(source);
    streams.set(tracked, stream);
    stream.once("close", () => {
      accounting.remove(tracked);
      streams.delete(tracked);
    });
    stream.on("data", (chunk: Buffer) => {
      // grpc-js stops decoding once the call has its status (trailers sent, or a
      // trailers-only answer); what its decoder holds stays until the stream closes.
      if (!tracked.frozen && callEnded(stream)) accounting.freeze(tracked);
      for (const r of accounting.data(tracked, chunk)) {
        const victim = streams.get(r.stream);
        streams.delete(r.stream);
        if (victim === undefined || victim.destroyed) continue;
        reset.add(victim);
        const remote = `${victim.session?.socket?.remoteAddress ?? "?"}:${victim.session?.socket?.remotePort ?? "?"}`;
        onRefused("incomplete_bytes", {
          remote,
          detail: `${r.heldBytes} bytes of an incomplete message past the ${BUDGET[r.overflow]}`,
        });
        victim.close(h2.NGHTTP2_ENHANCE_YOUR_CALM);
      }
    });
  });
  return {
    totalBytes: () => accounting.totalBytes,
    resetByNode: (stream) => reset.has(stream),
  };
}

const BUDGET = {
  before_open: "allowance of a stream before its Open (guest.maxIncompleteBytesBeforeOpen)",
  source: "budget of its source (guest.maxIncompleteBytesPerSource)",
  node: "node's budget (guest.maxIncompleteBytesTotal)",
} as const;

/** The node has sent the stream's gRPC status: trailers, or a trailers-only answer. */
function callEnded(stream: ServerHttp2Stream): boolean {
  return stream.sentTrailers !== undefined || stream.sentHeaders?.["grpc-status"] !== undefined;
}
