// The pages socket's framing (issue #15: a snapshot's pages over a socket of their own, beside
// grpc-js on the replication port). Each end opens with PAGES_MAGIC, then sends frames: a
// 5-byte head (kind, then the payload's length, big-endian u32) and the payload. The standby
// sends one hello (a StandbyMessage, protobuf); the primary answers accepted or refused (code
// and message) before anything else, then each chunk as the PrimaryMessage bytes the device
// already laid out (wire/snapshot-pages-encode.ts: no protobuf-es encode), then end. Pure: the
// reader says where the next bytes go (a buffer of the frame's own size, so a socket can read
// straight into it) and what a filled buffer completes; it never joins pieces.

/** The TLS application protocol a pages client offers (ALPN); grpc-js offers "h2". */
export const PAGES_ALPN = "vgpu-pages/1";

/** What each end sends first; its first byte is not the HTTP/2 preface's ("P"). */
export const PAGES_MAGIC: Uint8Array = Uint8Array.of(
  0x76,
  0x67,
  0x70,
  0x75,
  0x50,
  0x47,
  0x30,
  0x31,
); // "vgpuPG01"

export const FRAME = { hello: 1, accepted: 2, refused: 3, chunk: 4, end: 5 } as const;
export type FrameKind = (typeof FRAME)[keyof typeof FRAME];

export const FRAME_HEAD_BYTES = 5;
/** A hello is a few names and numbers; anything larger is refused unread. */
export const HELLO_BYTES_MAX = 16 * 1024;
/** A refusal's message is cut to this many bytes. */
const REFUSAL_MESSAGE_BYTES_MAX = 1024;

export interface Frame {
  readonly kind: FrameKind;
  readonly payload: Uint8Array;
  /** What a payload reader (FrameReaderOptions.payload) made of it. */
  readonly parsed?: unknown;
}

/** Reads a payload itself as it comes (where its bytes go, and what they make). */
export interface PayloadReader {
  target(): Uint8Array;
  /** `n` bytes were written at target(): the payload's result once whole, or why not. */
  filled(n: number): unknown;
}

/** Why a reader stopped; `foreign`: the other end's first bytes are not PAGES_MAGIC. */
export class FrameError extends Error {
  readonly foreign: boolean;
  constructor(message: string, foreign = false) {
    super(message);
    this.foreign = foreign;
  }
}

export function frameHead(kind: FrameKind, payloadBytes: number): Uint8Array {
  const head = new Uint8Array(FRAME_HEAD_BYTES);
  head[0] = kind;
  new DataView(head.buffer).setUint32(1, payloadBytes);
  return head;
}

/** A whole small frame: head and payload in one buffer. */
export function frameOf(kind: FrameKind, payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  const bytes = new Uint8Array(FRAME_HEAD_BYTES + payload.byteLength);
  bytes.set(frameHead(kind, payload.byteLength));
  bytes.set(payload, FRAME_HEAD_BYTES);
  return bytes;
}

/** A refused frame's payload: the code (u32) and the message (UTF-8, cut). */
export function refusedPayload(code: number, message: string): Uint8Array {
  const text = new TextEncoder().encode(message).subarray(0, REFUSAL_MESSAGE_BYTES_MAX);
  const payload = new Uint8Array(4 + text.byteLength);
  new DataView(payload.buffer).setUint32(0, code);
  payload.set(text, 4);
  return payload;
}

export function parseRefused(payload: Uint8Array): { code: number; message: string } {
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const message = new TextDecoder().decode(payload.subarray(4));
  return { code: view.getUint32(0), message };
}

export interface FrameReaderOptions {
  /** The kinds this end may receive, each with its largest payload. */
  readonly accepts: Partial<Record<FrameKind, number>>;
  /** A payload's buffer (the socket reads into it); a plain Uint8Array if left out. */
  readonly alloc?: (bytes: number) => Uint8Array;
  /**
   * A reader of its own for a frame's payload, given its buffer: target() and filled() go to
   * it until it returns a result (the frame's `parsed`) or an Error (the reader breaks).
   * Undefined: the payload is read into the buffer whole.
   */
  readonly payload?: (kind: FrameKind, buf: Uint8Array) => PayloadReader | undefined;
}

type Stage = "magic" | "head" | "payload" | "custom" | "broken";

/**
 * The frames of one direction. A socket asks `target()` where its next bytes go and calls
 * `filled(n)` once n bytes are there; `push` does both for bytes that came elsewhere (a
 * 'data' event), copying them. After an error, the reader is broken and takes nothing more.
 */
export class FrameReader {
  private readonly options: FrameReaderOptions;
  private stage: Stage = "magic";
  private buf: Uint8Array = new Uint8Array(PAGES_MAGIC.byteLength);
  private pos = 0;
  private kind: FrameKind = FRAME.hello;
  private readonly head = new Uint8Array(FRAME_HEAD_BYTES);
  private custom: PayloadReader | undefined;
  /** Where bytes go once broken (a socket may read once more before it is destroyed). */
  private static readonly scratch = new Uint8Array(64);

  constructor(options: FrameReaderOptions) {
    this.options = options;
  }

  /** Whether the other end's magic has been read (it speaks this protocol). */
  get greeted(): boolean {
    return this.stage !== "magic";
  }

  /** Where the next bytes go: never empty, never past the frame being read. */
  target(): Uint8Array {
    if (this.stage === "custom") return this.custom!.target();
    return this.stage === "broken" ? FrameReader.scratch : this.buf.subarray(this.pos);
  }

  /** `n` bytes were written at target(): the frame they complete, if any, or why not. */
  filled(n: number): Frame | FrameError | undefined {
    if (this.stage === "broken") return undefined;
    if (this.stage === "custom") return this.customFilled(n);
    this.pos += n;
    if (this.pos < this.buf.byteLength) return undefined;
    if (this.stage === "magic") return this.magicRead();
    if (this.stage === "head") return this.headRead();
    const frame: Frame = { kind: this.kind, payload: this.buf };
    this.expect("head", this.head);
    return frame;
  }

  /** Bytes from elsewhere: the frames they complete, or the error that broke the reader. */
  push(bytes: Uint8Array): Frame[] | FrameError {
    const frames: Frame[] = [];
    let at = 0;
    while (at < bytes.byteLength) {
      if (this.stage === "broken") return new FrameError("reader broken");
      const into = this.target();
      const n = Math.min(into.byteLength, bytes.byteLength - at);
      into.set(bytes.subarray(at, at + n));
      at += n;
      const r = this.filled(n);
      if (r instanceof FrameError) return r;
      if (r !== undefined) frames.push(r);
    }
    return frames;
  }

  private magicRead(): FrameError | undefined {
    for (let i = 0; i < PAGES_MAGIC.byteLength; i++) {
      if (this.buf[i] !== PAGES_MAGIC[i]) return this.broken("not a pages socket", true);
    }
    this.expect("head", this.head);
    return undefined;
  }

  private headRead(): Frame | FrameError | undefined {
    const kind = this.head[0] as FrameKind;
    const bytes = new DataView(this.head.buffer).getUint32(1);
    const max = this.options.accepts[kind];
    if (max === undefined) return this.broken(`unexpected frame kind ${kind}`);
    if (bytes > max) return this.broken(`frame of ${bytes} bytes, at most ${max}`);
    this.kind = kind;
    if (bytes === 0) {
      this.expect("head", this.head);
      return { kind, payload: new Uint8Array(0) };
    }
    const buf = this.options.alloc?.(bytes) ?? new Uint8Array(bytes);
    this.custom = this.options.payload?.(kind, buf);
    this.expect(this.custom === undefined ? "payload" : "custom", buf);
    return undefined;
  }

  private customFilled(n: number): Frame | FrameError | undefined {
    const r = this.custom!.filled(n);
    if (r === undefined) return undefined;
    if (r instanceof Error) return this.broken(r.message);
    const frame: Frame = { kind: this.kind, payload: this.buf, parsed: r };
    this.custom = undefined;
    this.expect("head", this.head);
    return frame;
  }

  private expect(stage: Stage, buf: Uint8Array): void {
    this.stage = stage;
    this.buf = buf;
    this.pos = 0;
  }

  private broken(message: string, foreign = false): FrameError {
    this.stage = "broken";
    return new FrameError(message, foreign);
  }
}
