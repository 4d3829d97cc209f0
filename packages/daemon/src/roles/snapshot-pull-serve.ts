// The primary's end of a pages socket (snapshot-pull-frames.ts): a connection the replication
// port routed here (TLS: the client chose PAGES_ALPN, after the port's mutual-TLS checks;
// plaintext: its first byte was PAGES_MAGIC's). It reads one bounded hello within
// HELLO_TIMEOUT_MS, hands it to the node with a PullStream over the socket (the same checks
// and codes as PullSnapshot: node.ts, snapshot-pull.ts), answers accepted or refused before any
// chunk, and writes each chunk as a head and the device's wire bytes (no copy, no protobuf-es
// encode). The outlet ends the stream when the snapshot ends or the primary stops; the socket
// closes with it. Anything the standby sends after its hello ends the pull.
import type { Duplex } from "node:stream";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  decodeStandbyMessage,
  type ErrorCode,
  encodePrimaryMessage,
  encodePulledChunk,
  MalformedError,
  type PrimaryMessage,
  type StandbyMessage,
  wire,
} from "@vgpu-ha/common";
import type { PullStream } from "@vgpu-ha/primary";
import {
  FRAME,
  FrameReader,
  frameHead,
  frameOf,
  HELLO_BYTES_MAX,
  PAGES_MAGIC,
  refusedPayload,
} from "./snapshot-pull-frames.js";

/** A standby that has not sent its hello by then is dropped. */
export const HELLO_TIMEOUT_MS = 5_000;

export type PullServer = (
  request: StandbyMessage | Error,
  stream: PullStream,
  remote: string,
) => void;

type PagesSocket = Duplex & {
  readonly remoteAddress?: string | undefined;
  readonly remotePort?: number | undefined;
  setNoDelay?(noDelay: boolean): unknown;
};

export function servePagesSocket(
  socket: PagesSocket,
  serve: PullServer,
  helloTimeoutMs = HELLO_TIMEOUT_MS,
): void {
  socket.setNoDelay?.(true);
  socket.on("error", () => undefined); // a reset: 'close' follows, the outlet drops the pull
  // Named so the log tells a socket's pull from PullSnapshot's ("snapshot pull opened").
  const remote = `pages:${socket.remoteAddress ?? "?"}:${socket.remotePort ?? "?"}`;
  const reader = new FrameReader({ accepts: { [FRAME.hello]: HELLO_BYTES_MAX } });
  const timer = setTimeout(() => socket.destroy(), helloTimeoutMs);
  socket.once("close", () => clearTimeout(timer));
  socket.write(PAGES_MAGIC);
  let helloRead = false;
  socket.on("data", (bytes: Buffer) => {
    if (helloRead) {
      socket.destroy(); // the pull is one way after the hello
      return;
    }
    const frames = reader.push(bytes);
    if (frames instanceof Error || frames.length > 1) {
      socket.destroy();
      return;
    }
    const hello = frames[0];
    if (hello === undefined) return;
    helloRead = true;
    clearTimeout(timer);
    const stream = socketPullStream(socket);
    serve(helloOf(hello.payload), stream, remote);
    stream.answer();
  });
  socket.resume(); // the port paused it to read its first byte (plaintext)
}

function helloOf(payload: Uint8Array): StandbyMessage | Error {
  try {
    return decodeStandbyMessage(fromBinary(wire.StandbyMessageSchema, payload));
  } catch (e) {
    return new MalformedError(`hello: ${(e as Error).message}`);
  }
}

/** A pulled chunk as the bytes of its PrimaryMessage (the device's wire layout, in place). */
function pulledBytes(m: PrimaryMessage): Uint8Array {
  if (m.kind === "snapshot" && m.chunk.meta === undefined)
    return encodePulledChunk(m.epoch, m.chunk);
  return toBinary(wire.PrimaryMessageSchema, encodePrimaryMessage(m));
}

/** The PullStream the outlet writes, with `answer`: accepted, unless refused already. */
function socketPullStream(socket: PagesSocket): PullStream & { answer(): void } {
  let answered = false;
  let closed = false;
  const handlers: (() => void)[] = [];
  socket.once("close", () => {
    closed = true;
    for (const h of handlers) h();
  });
  const answer = () => {
    if (answered || closed) return;
    answered = true;
    socket.write(frameOf(FRAME.accepted));
  };
  return {
    answer,
    write(m) {
      if (closed) return false;
      answer();
      const bytes = pulledBytes(m);
      socket.cork();
      socket.write(frameHead(FRAME.chunk, bytes.byteLength));
      const room = socket.write(bytes);
      socket.uncork();
      return room;
    },
    end() {
      if (closed) return;
      answer();
      closed = true;
      socket.end(frameOf(FRAME.end));
    },
    fail(code: ErrorCode, message: string) {
      if (closed) return;
      answered = true;
      closed = true;
      socket.end(frameOf(FRAME.refused, refusedPayload(code, message)));
    },
    onClose: (h) => handlers.push(h),
  };
}
