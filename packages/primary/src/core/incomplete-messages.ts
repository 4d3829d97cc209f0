// What incomplete guest messages make the node hold, and which stream to reset past a budget.
// grpc-js reads each HTTP/2 stream into a decoder until it holds a whole gRPC message (a 5-byte
// prefix: a flag and a big-endian length, then that many bytes), so a message that never ends
// holds every byte sent of it for as long as its stream lives. The decoder keeps the bytes as
// slices of what Node handed it: each HTTP/2 DATA frame is a slice of the buffer of the socket
// read that carried it (64 KiB), and a slice keeps its whole buffer alive, so one byte held can
// pin 64 KiB. And it lets go of a message's slices only when the next message begins (not when
// the message completes: it copies a whole message out and keeps the pieces until then).
// MessageFramer reads the same prefixes from the same bytes; IncompleteMessages charges each
// stream the buffers its decoder keeps (those of the message it reads or read last), and each
// source and the node each such buffer once (the streams of one connection share its reads; no
// buffer is shared between connections), and names the streams to reset:
//   - a stream whose first message (the Open) has not yet arrived whole may pin at most
//     maxIncompleteBytesBeforeOpen (an Open is a few hundred bytes, in one or two reads);
//   - a source past maxIncompleteBytesPerSource loses its stream pinning most;
//   - past maxIncompleteBytesTotal, the source pinning most loses its stream pinning most.
// Pure: the I/O shell (packages/daemon/src/guest-memory.ts) feeds it the bytes and resets.

export interface IncompleteMessageLimits {
  /** Per stream, until its first message has arrived whole. */
  readonly maxIncompleteBytesBeforeOpen: number;
  /** All streams of one source address. */
  readonly maxIncompleteBytesPerSource: number;
  /** All guest streams of the node. */
  readonly maxIncompleteBytesTotal: number;
}

/** Which budget a reset stream went past. */
export type IncompleteMessageOverflow = "before_open" | "source" | "node";

const PREFIX_BYTES = 5;

/**
 * Reads gRPC message prefixes as grpc-js's StreamDecoder does: `heldBytes` is what such a
 * decoder holds of the message it has begun and not finished (its prefix bytes and its body so
 * far); `startedInLastChunk` and `slicedLastChunk` say what it did with the last chunk.
 */
export class MessageFramer {
  /** Bytes of the current, incomplete message received so far (prefix included). */
  heldBytes = 0;
  /** Whole messages read. */
  messages = 0;
  /** A message began in the last chunk: the decoder let go of the slices of the one before. */
  startedInLastChunk = false;
  /**
   * The decoder keeps a slice of the last chunk: it holds the flag byte or body bytes of the
   * latest message begun (the length bytes are copied out).
   */
  slicedLastChunk = false;
  /** Prefix bytes still to read (0: reading a body). */
  private prefixLeft = PREFIX_BYTES;
  /** The length prefix as read so far. */
  private length = 0;
  /** Body bytes still to read. */
  private bodyLeft = 0;

  write(chunk: Uint8Array): void {
    let at = 0;
    this.startedInLastChunk = false;
    this.slicedLastChunk = false;
    while (at < chunk.length) {
      if (this.prefixLeft > 0) {
        // Byte 0 is the compression flag (kept as a slice); bytes 1-4 the length (copied).
        if (this.prefixLeft <= 4) this.length = this.length * 256 + chunk[at]!;
        else {
          this.startedInLastChunk = true;
          this.slicedLastChunk = true;
        }
        at++;
        this.prefixLeft--;
        this.heldBytes++;
        if (this.prefixLeft === 0) {
          this.bodyLeft = this.length;
          if (this.bodyLeft === 0) this.completed();
        }
        continue;
      }
      const take = Math.min(this.bodyLeft, chunk.length - at);
      if (take > 0) this.slicedLastChunk = true;
      at += take;
      this.bodyLeft -= take;
      this.heldBytes += take;
      if (this.bodyLeft === 0) this.completed();
    }
  }

  private completed(): void {
    this.messages++;
    this.heldBytes = 0;
    this.prefixLeft = PREFIX_BYTES;
    this.length = 0;
  }
}

/** One guest stream as the accounting sees it. */
export interface TrackedStream {
  readonly source: string;
  readonly framer: MessageFramer;
  /** The buffers its decoder has slices of (chunks' `buffer`): of its latest message. */
  readonly pinned: Set<ArrayBufferLike>;
  /** Their sizes, added up: what this stream keeps alive. */
  pinnedBytes: number;
  /** The node ended its call: its decoder reads no more, but keeps what it holds. */
  frozen: boolean;
  /** Reset or closed: no longer counted. */
  gone: boolean;
}

interface Source {
  /** The buffers its streams pin, each once. */
  bytes: number;
  readonly streams: Set<TrackedStream>;
  /** Each pinned buffer and how many of the source's streams pin it. */
  readonly buffers: Map<ArrayBufferLike, number>;
}

export interface StreamToReset {
  readonly stream: TrackedStream;
  readonly overflow: IncompleteMessageOverflow;
  /** What it pinned. */
  readonly heldBytes: number;
}

export class IncompleteMessages {
  private readonly limits: IncompleteMessageLimits;
  private readonly sources = new Map<string, Source>();
  private total = 0;

  constructor(limits: IncompleteMessageLimits) {
    this.limits = limits;
  }

  /** A new stream from `source`. */
  add(source: string): TrackedStream {
    const stream: TrackedStream = {
      source,
      framer: new MessageFramer(),
      pinned: new Set(),
      pinnedBytes: 0,
      frozen: false,
      gone: false,
    };
    let s = this.sources.get(source);
    if (s === undefined) {
      s = { bytes: 0, streams: new Set(), buffers: new Map() };
      this.sources.set(source, s);
    }
    s.streams.add(stream);
    return stream;
  }

  /**
   * Bytes the stream's decoder read (a slice of the buffer `chunk.buffer`). Returns the streams
   * to reset, now uncounted (none while every budget holds): this one past its allowance before
   * Open, else the largest streams of the source past its budget, or of the hungriest source
   * past the node's.
   */
  data(stream: TrackedStream, chunk: Uint8Array): StreamToReset[] {
    if (stream.gone || stream.frozen) return [];
    const source = this.sources.get(stream.source)!;
    const framer = stream.framer;
    framer.write(chunk);
    // A message began: the decoder let go of the slices of the one before.
    if (framer.startedInLastChunk) this.unpinAll(source, stream);
    if (framer.slicedLastChunk && !stream.pinned.has(chunk.buffer)) {
      this.pin(source, stream, chunk.buffer);
    }
    const out: StreamToReset[] = [];
    if (framer.messages === 0 && stream.pinnedBytes > this.limits.maxIncompleteBytesBeforeOpen) {
      out.push(this.reset(stream, "before_open"));
      return out;
    }
    while (source.bytes > this.limits.maxIncompleteBytesPerSource) {
      out.push(this.reset(largest(source.streams), "source"));
    }
    while (this.total > this.limits.maxIncompleteBytesTotal) {
      out.push(this.reset(largest(this.hungriestSource().streams), "node"));
    }
    return out;
  }

  /**
   * The node ended the stream's call: grpc-js reads nothing more of it, and keeps what its
   * decoder holds until the stream closes (still charged).
   */
  freeze(stream: TrackedStream): void {
    stream.frozen = true;
  }

  /** The stream closed (or was reset): what only it pinned is free. Idempotent. */
  remove(stream: TrackedStream): void {
    if (stream.gone) return;
    stream.gone = true;
    const s = this.sources.get(stream.source);
    if (s === undefined) return;
    this.unpinAll(s, stream);
    s.streams.delete(stream);
    if (s.streams.size === 0) this.sources.delete(stream.source);
  }

  /** Bytes pinned by incomplete messages, node-wide. */
  get totalBytes(): number {
    return this.total;
  }

  /** Bytes pinned by the incomplete messages of the streams of `source`. */
  bytesOf(source: string): number {
    return this.sources.get(source)?.bytes ?? 0;
  }

  private pin(source: Source, stream: TrackedStream, buffer: ArrayBufferLike): void {
    stream.pinned.add(buffer);
    stream.pinnedBytes += buffer.byteLength;
    const holders = source.buffers.get(buffer) ?? 0;
    source.buffers.set(buffer, holders + 1);
    if (holders === 0) {
      source.bytes += buffer.byteLength;
      this.total += buffer.byteLength;
    }
  }

  private unpinAll(source: Source, stream: TrackedStream): void {
    for (const buffer of stream.pinned) {
      const holders = source.buffers.get(buffer)! - 1;
      if (holders > 0) {
        source.buffers.set(buffer, holders);
        continue;
      }
      source.buffers.delete(buffer);
      source.bytes -= buffer.byteLength;
      this.total -= buffer.byteLength;
    }
    stream.pinned.clear();
    stream.pinnedBytes = 0;
  }

  private reset(stream: TrackedStream, overflow: IncompleteMessageOverflow): StreamToReset {
    const heldBytes = stream.pinnedBytes;
    this.remove(stream);
    return { stream, overflow, heldBytes };
  }

  private hungriestSource(): Source {
    let most: Source | undefined;
    for (const s of this.sources.values()) if (most === undefined || s.bytes > most.bytes) most = s;
    // total > 0 means some source pins bytes.
    return most!;
  }
}

/** The stream pinning most (the first of equals: the oldest). */
function largest(streams: Set<TrackedStream>): TrackedStream {
  let most: TrackedStream | undefined;
  for (const s of streams) if (most === undefined || s.pinnedBytes > most.pinnedBytes) most = s;
  return most!;
}
