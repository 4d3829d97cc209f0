// A snapshot's chunk 0 (its metadata: contexts, buffers, sessions and their cached replies) as
// the bytes of its PrimaryMessage, written and read without protobuf-es's reflection: the same
// bytes as toBinary of encodePrimaryMessage, and the same domain message as fromBinary then
// decodePrimaryMessage (tests compare both, on random metadata and on mutated bytes).
// Why: a session's reply cache holds up to limits.replyCacheFrames (4096) replies, each a
// message of its own; the generated code took ~25-45 ms to encode such a chunk 0 and ~50-70 ms
// to decode it in a process that had not done it before (a snapshot is rare, so always), on
// the critical path of every snapshot (docs/benchmarks.md, "The snapshot's start").
// The reader takes only the shape the writer makes (known fields, each singular one once, no
// 64-bit value above 2^53 - 1, a result in every reply): anything else returns undefined and
// the caller decodes it with the generated code, which says what is wrong with it.
import type { CallOutput, CallResult } from "../calls.js";
import { NO_OUTPUT } from "../calls.js";
import type { ErrorCode } from "../core/errors.js";
import type { PrimaryMessage } from "../core/messages.js";
import { FieldWriter, lenBytes, scalarBytes, varintBytes } from "../core/pages-wire.js";
import type {
  SnapshotBo,
  SnapshotChunk,
  SnapshotContext,
  SnapshotMeta,
  SnapshotSession,
} from "../core/snapshot.js";
import { invariant } from "../errors.js";

const VARINT = 0;
const LEN = 2;
const tag = (field: number, type: number) => (field << 3) | type;

const utf8 = new TextEncoder();
// As protobuf-es decodes strings: invalid UTF-8 is refused (it throws; here: not mine), a BOM kept.
const utf8Decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

// ---- encode ----

/** Sizes of the nested messages, computed once, in the order they are written. */
class Sizes {
  readonly list: number[] = [];
  readonly strings = new Map<string, Uint8Array>();
  str(s: string): number {
    if (s === "") return 0;
    let b = this.strings.get(s);
    if (b === undefined) {
      b = utf8.encode(s);
      this.strings.set(s, b);
    }
    return lenBytes(b.byteLength);
  }
  /** Reserves the slot of a message's size (filled once known); returns its index. */
  open(): number {
    this.list.push(0);
    return this.list.length - 1;
  }
}

const fieldVarint = (n: number) => 1 + varintBytes(n); // a oneof member: written even when 0

function resultSize(r: CallResult, s: Sizes): number {
  invariant(r.code >= 0, "a result code is never negative");
  let n = scalarBytes(r.code) + s.str(r.message);
  const o = r.output;
  if (o.kind === "handle") n += fieldVarint(o.handle);
  else if (o.kind === "fence") n += fieldVarint(o.value);
  else if (o.kind === "data") n += lenBytes(o.data.byteLength);
  return n;
}

/** A varint's bytes, the common sizes without a loop. */
const vlen = (n: number) => (n < 128 ? 1 : n < 16384 ? 2 : varintBytes(n));

/**
 * A result's bytes. The common one (OK, no message, a fence value) is counted in line: a
 * session's cache holds thousands, and this runs once per snapshot, in code not yet compiled.
 */
function resultBytes(r: CallResult, s: Sizes): number {
  const o = r.output;
  if (r.code === 0 && r.message === "" && o.kind === "fence") return 1 + vlen(o.value);
  return resultSize(r, s);
}

/** A reply's bytes (without its own tag and length), given its result's. */
const replyBytes = (frame: number, result: number) =>
  (frame === 0 ? 0 : 1 + vlen(frame)) + 1 + vlen(result) + result;

function sessionSize(x: SnapshotSession, s: Sizes): number {
  const slot = s.open();
  let n = s.str(x.sessionId) + s.str(x.tenant) + scalarBytes(x.lastFrame);
  const replies = x.replies;
  for (let i = 0; i < replies.length; i++) {
    const r = replies[i]!;
    const reply = replyBytes(r.frame, resultBytes(r.result, s));
    n += 1 + vlen(reply) + reply;
  }
  s.list[slot] = n;
  return n;
}

const boSize = (b: SnapshotBo) =>
  scalarBytes(b.handle) + scalarBytes(b.sizeBytes) + (b.mapped ? 2 : 0);

function contextSize(c: SnapshotContext, s: Sizes): number {
  const slot = s.open();
  let n = scalarBytes(c.handle) + s.str(c.tenant) + s.str(c.sessionId);
  n += scalarBytes(c.nextBoHandle) + scalarBytes(c.fenceValue);
  for (const b of c.bos) n += lenBytes(boSize(b));
  s.list[slot] = n;
  return n;
}

function metaSize(m: SnapshotMeta, s: Sizes): number {
  let n = scalarBytes(m.nextContextHandle);
  for (const c of m.contexts) n += lenBytes(contextSize(c, s));
  for (const x of m.sessions) n += lenBytes(sessionSize(x, s));
  return n;
}

/** FieldWriter by field number, with the measured sizes of the nested messages. */
class Writer extends FieldWriter {
  private slot = 0;
  constructor(
    bytes: number,
    readonly sizes: Sizes,
  ) {
    super(new Uint8Array(bytes));
  }
  /** A varint field, left out when 0 (proto3). */
  num(field: number, n: number): void {
    this.scalar(tag(field, VARINT), n);
  }
  /** A varint field written even when 0 (a oneof member). */
  always(field: number, n: number): void {
    this.head(tag(field, VARINT), n);
  }
  len(field: number, length: number): void {
    this.head(tag(field, LEN), length);
  }
  /** The next nested message's head, its size as measured. */
  nested(field: number): void {
    this.len(field, this.sizes.list[this.slot++]!);
  }
  bytes(field: number, b: Uint8Array): void {
    this.len(field, b.byteLength);
    this.buf.set(b, this.pos);
    this.pos += b.byteLength;
  }
  str(field: number, s: string): void {
    if (s !== "") this.bytes(field, this.sizes.strings.get(s)!);
  }
}

/** A reply: its sizes counted again (cheaper than keeping thousands of them). */
function writeReply(w: Writer, frame: number, r: CallResult, s: Sizes): void {
  const result = resultBytes(r, s);
  w.len(4, replyBytes(frame, result));
  w.num(1, frame);
  w.len(2, result);
  w.num(1, r.code);
  w.str(2, r.message);
  const o = r.output;
  if (o.kind === "handle") w.always(3, o.handle);
  else if (o.kind === "data") w.bytes(4, o.data);
  else if (o.kind === "fence") w.always(5, o.value);
}

function writeMeta(w: Writer, m: SnapshotMeta): void {
  w.num(1, m.nextContextHandle);
  for (const c of m.contexts) {
    w.nested(2);
    w.num(1, c.handle);
    w.str(2, c.tenant);
    w.str(3, c.sessionId);
    w.num(4, c.nextBoHandle);
    w.num(5, c.fenceValue);
    for (const b of c.bos) {
      w.len(6, boSize(b));
      w.num(1, b.handle);
      w.num(2, b.sizeBytes);
      if (b.mapped) w.always(3, 1);
    }
  }
  for (const x of m.sessions) {
    w.nested(3);
    w.str(1, x.sessionId);
    w.str(2, x.tenant);
    w.num(3, x.lastFrame);
    const replies = x.replies;
    for (let i = 0; i < replies.length; i++) {
      const r = replies[i]!;
      writeReply(w, r.frame, r.result, w.sizes);
    }
  }
}

/** A chunk that carries metadata and no pages (chunk 0) as the bytes of its PrimaryMessage. */
export function encodeMetaChunk(epoch: number, chunk: SnapshotChunk): Uint8Array {
  const meta = chunk.meta;
  invariant(meta !== undefined && chunk.pages.length === 0, "a metadata chunk has no pages");
  const sizes = new Sizes();
  const metaBytes = metaSize(meta, sizes);
  const chunkBytes =
    scalarBytes(chunk.snapshotId) +
    scalarBytes(chunk.atSeq) +
    scalarBytes(chunk.index) +
    (chunk.last ? 2 : 0) +
    lenBytes(metaBytes);
  const w = new Writer(scalarBytes(epoch) + lenBytes(chunkBytes), sizes);
  w.num(1, epoch);
  w.len(4, chunkBytes);
  w.num(1, chunk.snapshotId);
  w.num(2, chunk.atSeq);
  w.num(3, chunk.index);
  if (chunk.last) w.always(4, 1);
  w.len(5, metaBytes);
  writeMeta(w, meta);
  invariant(w.pos === w.buf.byteLength, "metadata chunk size miscounted");
  return w.buf;
}

// ---- decode ----

/** Thrown inside the reader when the bytes are not in the writer's shape: the caller defers. */
class NotMine {}
const NOT_MINE = new NotMine();
const notMine = (): never => {
  throw NOT_MINE;
};

class Reader {
  pos: number;
  end: number;
  constructor(
    readonly buf: Uint8Array,
    pos: number,
    end: number,
  ) {
    this.pos = pos;
    this.end = end;
  }
  /**
   * Narrows the reader to the length-delimited field at its position (no reader made: replies
   * are thousands); returns the end to give back to leave() once the field is read.
   */
  enter(): number {
    const length = this.varint();
    const outer = this.end;
    if (length > outer - this.pos) return notMine();
    this.end = this.pos + length;
    return outer;
  }
  leave(outer: number): void {
    this.end = outer;
  }
  get more(): boolean {
    return this.pos < this.end;
  }
  /** A varint of one or two bytes in line; longer ones by varintLong(). */
  varint(): number {
    const b = this.buf;
    const at = this.pos;
    if (at + 1 < this.end) {
      const b0 = b[at]!;
      if (b0 < 128) {
        this.pos = at + 1;
        return b0;
      }
      const b1 = b[at + 1]!;
      if (b1 < 128) {
        this.pos = at + 2;
        return (b0 & 127) + b1 * 128;
      }
    }
    return this.varintLong();
  }
  /** A varint up to 2^53 - 1 (larger, or longer than 8 bytes: not mine). */
  varintLong(): number {
    let n = 0;
    let scale = 1;
    for (let i = 0; i < 8; i++) {
      if (this.pos >= this.end) return notMine();
      const b = this.buf[this.pos++]!;
      n += (b & 127) * scale;
      if (b < 128) return n <= Number.MAX_SAFE_INTEGER ? n : notMine();
      scale *= 128;
    }
    return notMine();
  }
  uint32(): number {
    const n = this.varint();
    return n <= 0xffffffff ? n : notMine();
  }
  /** A length-delimited field's bounds; the reader moves past it. */
  sub(): Reader {
    const length = this.varint();
    const start = this.pos;
    if (length > this.end - start) return notMine();
    this.pos = start + length;
    return new Reader(this.buf, start, start + length);
  }
  str(): string {
    const r = this.sub();
    try {
      return utf8Decoder.decode(this.buf.subarray(r.pos, r.end));
    } catch {
      return notMine();
    }
  }
}

/** Reads each field of a message: `field` is told (number, wire type) and reads it. */
function fields(r: Reader, field: (n: number, type: number) => void): void {
  while (r.more) {
    const t = r.uint32();
    field(t >>> 3, t & 7);
  }
}

/** Fields seen so far, a bit per field number (all below 31). */
interface Seen {
  bits: number;
}

/** A singular field seen twice, or with another wire type, is not the writer's. */
function once(seen: Seen, n: number, type: number, want: number): void {
  const bit = 1 << n;
  if (type !== want || n > 30 || seen.bits & bit) notMine();
  seen.bits |= bit;
}

/** The result at the reader's position (its field narrowed by enter()). */
function readResult(r: Reader): CallResult {
  let code = 0;
  let message = "";
  let output: CallOutput = NO_OUTPUT;
  let seen = 0; // a bit per field number; the oneof's members share bit 3
  // A loop of its own, not fields(): thousands of replies per chunk 0.
  while (r.pos < r.end) {
    const t = r.uint32();
    const n = t >>> 3;
    const bit = 1 << (n >= 3 && n <= 5 ? 3 : n);
    if (n < 1 || n > 5 || seen & bit) notMine(); // unknown, or set twice (a oneof's last wins)
    seen |= bit;
    if (t === tag(1, VARINT)) {
      code = r.varint();
      if (code > 0x7fffffff) notMine();
    } else if (t === tag(2, LEN)) message = r.str();
    else if (t === tag(3, VARINT)) output = { kind: "handle", handle: r.uint32() };
    else if (t === tag(5, VARINT)) output = { kind: "fence", value: r.varint() };
    else if (t === tag(4, LEN)) {
      const d = r.sub();
      output = { kind: "data", data: r.buf.slice(d.pos, d.end) };
    } else notMine(); // another wire type
  }
  return { code: code as ErrorCode, message, output };
}

function readSession(r: Reader): SnapshotSession {
  let sessionId = "";
  let tenant = "";
  let lastFrame = 0;
  const replies: { frame: number; result: CallResult }[] = [];
  const seen: Seen = { bits: 0 };
  fields(r, (n, type) => {
    if (n === 1) {
      once(seen, n, type, LEN);
      sessionId = r.str();
    } else if (n === 2) {
      once(seen, n, type, LEN);
      tenant = r.str();
    } else if (n === 3) {
      once(seen, n, type, VARINT);
      lastFrame = r.varint();
    } else if (n === 4 && type === LEN) {
      const outer = r.enter();
      replies.push(readReply(r));
      r.leave(outer);
    } else notMine();
  });
  return { sessionId, tenant, lastFrame, replies };
}

/** The reply at the reader's position (its field narrowed by enter()). */
function readReply(r: Reader): { frame: number; result: CallResult } {
  let frame = 0;
  let frameSeen = false;
  let result: CallResult | undefined;
  while (r.pos < r.end) {
    const t = r.uint32();
    if (t === tag(1, VARINT) && !frameSeen) {
      frameSeen = true;
      frame = r.varint();
    } else if (t === tag(2, LEN) && result === undefined) {
      const outer = r.enter();
      result = readResult(r);
      r.leave(outer);
    } else notMine();
  }
  return result === undefined ? notMine() : { frame, result };
}

function readBo(r: Reader): SnapshotBo {
  let handle = 0;
  let sizeBytes = 0;
  let mapped = false;
  const seen: Seen = { bits: 0 };
  fields(r, (n, type) => {
    once(seen, n, type, VARINT);
    if (n === 1) handle = r.uint32();
    else if (n === 2) sizeBytes = r.varint();
    else if (n === 3) mapped = r.varint() !== 0;
    else notMine();
  });
  return { handle, sizeBytes, mapped };
}

function readContext(r: Reader): SnapshotContext {
  const c = { handle: 0, tenant: "", sessionId: "", nextBoHandle: 0, fenceValue: 0 };
  const bos: SnapshotBo[] = [];
  const seen: Seen = { bits: 0 };
  fields(r, (n, type) => {
    if (n === 6 && type === LEN) {
      bos.push(readBo(r.sub()));
      return;
    }
    once(seen, n, type, n === 2 || n === 3 ? LEN : VARINT);
    if (n === 1) c.handle = r.uint32();
    else if (n === 2) c.tenant = r.str();
    else if (n === 3) c.sessionId = r.str();
    else if (n === 4) c.nextBoHandle = r.uint32();
    else if (n === 5) c.fenceValue = r.varint();
    else notMine();
  });
  return { ...c, bos };
}

function readMeta(r: Reader): SnapshotMeta {
  let nextContextHandle = 0;
  const contexts: SnapshotContext[] = [];
  const sessions: SnapshotSession[] = [];
  const seen: Seen = { bits: 0 };
  fields(r, (n, type) => {
    if (n === 2 && type === LEN) contexts.push(readContext(r.sub()));
    else if (n === 3 && type === LEN) sessions.push(readSession(r.sub()));
    else if (n === 1 || n === 4) {
      once(seen, n, type, VARINT);
      const v = r.varint(); // 4: total_chunks_hint, which the domain does not keep
      if (n === 1) nextContextHandle = v <= 0xffffffff ? v : notMine();
    } else notMine();
  });
  return { nextContextHandle, contexts, sessions };
}

function readChunk(r: Reader): SnapshotChunk {
  const c = { snapshotId: 0, atSeq: 0, index: 0, last: false };
  let meta: SnapshotMeta | undefined;
  const seen: Seen = { bits: 0 };
  fields(r, (n, type) => {
    once(seen, n, type, n === 5 ? LEN : VARINT);
    if (n === 1) c.snapshotId = r.varint();
    else if (n === 2) c.atSeq = r.varint();
    else if (n === 3) c.index = r.uint32();
    else if (n === 4) c.last = r.varint() !== 0;
    else if (n === 5) meta = readMeta(r.sub());
    else notMine(); // pages (6): chunks of pages are the generated code's
  });
  return meta === undefined ? notMine() : { ...c, meta, pages: [] };
}

/** Past a varint at `i` (its end; beyond the bytes when cut). */
function skipVarint(b: Uint8Array, i: number): number {
  let at = i;
  while (at < b.byteLength && b[at]! >= 128) at++;
  return at + 1;
}

/**
 * Whether a PrimaryMessage's bytes start as the writer's chunk 0 does (its epoch, then a
 * snapshot chunk whose varint fields lead to its metadata): a look at a few bytes, so that the
 * stream's other messages (entries above all) pay nothing more.
 */
export function looksLikeMetaChunk(b: Uint8Array): boolean {
  let i = b[0] === tag(1, VARINT) ? skipVarint(b, 1) : 0;
  if (b[i] !== tag(4, LEN)) return false;
  i = skipVarint(b, i + 1);
  while (i < b.byteLength) {
    const t = b[i++]!;
    if (t === tag(5, LEN)) return true;
    if ((t & 7) !== VARINT || t < tag(1, VARINT) || t > tag(4, VARINT)) return false;
    i = skipVarint(b, i);
  }
  return false;
}

/**
 * A PrimaryMessage's bytes, decoded here when they are a snapshot chunk with metadata and no
 * pages in the writer's shape; undefined otherwise (decode them with the generated code).
 */
export function decodeMetaChunk(bytes: Uint8Array): PrimaryMessage | undefined {
  try {
    const r = new Reader(bytes, 0, bytes.byteLength);
    let epoch = 0;
    let chunk: SnapshotChunk | undefined;
    const seen: Seen = { bits: 0 };
    fields(r, (n, type) => {
      once(seen, n, type, n === 4 ? LEN : VARINT);
      if (n === 1) epoch = r.varint();
      else if (n === 4) chunk = readChunk(r.sub());
      else notMine();
    });
    return chunk === undefined ? undefined : { kind: "snapshot", epoch, chunk };
  } catch (e) {
    if (e === NOT_MINE) return undefined;
    throw e;
  }
}
