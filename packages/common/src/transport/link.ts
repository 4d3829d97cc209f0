// One transport interface for the replication stream, with a gRPC implementation (a duplex
// stream of generated messages, converted at the edge) and an in-memory one for tests.
import { seqTraceOn, traceLinkMessage } from "../seq-trace.js";

export interface Link<Out, In> {
  /** Queues a message; false when the transport's buffer is full (wait for onDrain). */
  send(message: Out): boolean;
  onMessage(handler: (message: In) => void): void;
  onDrain(handler: () => void): void;
  /** Called once, when the link ends for any reason. */
  onClose(handler: (reason: string) => void): void;
  close(reason?: string): void;
}

/**
 * A Link over a gRPC duplex stream (client or server side). `decode` returns an Error for a
 * malformed message, which closes the link.
 */
/** What grpcLink needs of a grpc-js client or server duplex stream. */
export interface DuplexLike<WireOut> {
  write(message: WireOut): boolean;
  end(): unknown;
  cancel?(): void;
  // biome-ignore lint/suspicious/noExplicitAny: node event listener signature
  on(event: string, listener: (...args: any[]) => void): unknown;
}

export function grpcLink<Out, In, WireOut, WireIn>(
  stream: DuplexLike<WireOut>,
  encode: (m: Out) => WireOut,
  decode: (w: WireIn) => In | Error,
): Link<Out, In> {
  let closed = false;
  const closeHandlers: ((reason: string) => void)[] = [];
  const finish = (reason: string) => {
    if (closed) return;
    closed = true;
    for (const h of closeHandlers) h(reason);
  };
  stream.on("error", (e: Error) => finish(e.message));
  stream.on("end", () => finish("stream ended"));
  stream.on("close", () => finish("stream closed"));
  const link: Link<Out, In> = {
    send(message) {
      if (closed) return false;
      if (seqTraceOn) traceLinkMessage("send", message);
      return stream.write(encode(message));
    },
    onMessage(handler) {
      stream.on("data", (w: WireIn) => {
        if (closed) return;
        const m = decode(w);
        if (m instanceof Error) {
          link.close(`malformed message: ${m.message}`);
          return;
        }
        if (seqTraceOn) traceLinkMessage("recv", m);
        handler(m);
      });
    },
    onDrain(handler) {
      stream.on("drain", handler);
    },
    onClose(handler) {
      closeHandlers.push(handler);
    },
    close(reason = "closed") {
      if (closed) return;
      if (stream.cancel) stream.cancel();
      else stream.end();
      finish(reason);
    },
  };
  return link;
}

/** Two Links joined in memory; messages arrive in order on a later microtask. */
export function memoryLinkPair<A, B>(): [Link<A, B>, Link<B, A>] {
  type Side<O, I> = {
    handlers: ((m: I) => void)[];
    closeHandlers: ((r: string) => void)[];
    peer?: Side<I, O>;
    closed: boolean;
  };
  const a: Side<A, B> = { handlers: [], closeHandlers: [], closed: false };
  const b: Side<B, A> = { handlers: [], closeHandlers: [], closed: false };
  a.peer = b;
  b.peer = a;
  const make = <O, I>(side: Side<O, I>): Link<O, I> => ({
    send(message) {
      if (side.closed) return false;
      queueMicrotask(() => {
        const peer = side.peer!;
        if (!peer.closed) for (const h of peer.handlers) h(message);
      });
      return true;
    },
    onMessage(h) {
      side.handlers.push(h);
    },
    onDrain() {},
    onClose(h) {
      side.closeHandlers.push(h);
    },
    close(reason = "closed") {
      for (const s of [side, side.peer!] as Side<unknown, unknown>[]) {
        if (s.closed) continue;
        s.closed = true;
        for (const h of s.closeHandlers) h(reason);
      }
    },
  });
  return [make(a), make(b)];
}
