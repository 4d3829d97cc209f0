// The byte-level primitives of the packed entry encoding (entry-pack.ts,
// docs/replication.md#entry-encoding): varints, zigzag integers, length-prefixed bytes,
// little-endian float32, texts, and names interned in a table that outlives one batch (a
// stream's, or a retained-log slab's). The writer is reused and only grows; large byte fields
// are referenced, not copied, until finish() assembles the batch. The reader bounds-checks
// every read and throws MalformedError for anything out of shape.
import { MalformedError } from "./malformed.js";

const U32_MAX = 0xffffffff;
/** A varint carries at most 8 bytes (56 bits); values above 2^53 - 1 are refused. */
const VARINT_BYTES_MAX = 8;
/** Byte fields from this size are referenced while a batch is written, and decoded as views. */
export const BYTES_BY_REFERENCE_MIN = 1024;

/** Name references: a new name follows and joins the table; a name outside the table; table[k - 2]. */
const NAME_NEW = 0;
const NAME_LITERAL = 1;
const NAME_INDEX_BASE = 2;

/** Bounds of a name table: the decoder refuses a table beyond them, the encoder stays below. */
export const NAME_TABLE_LIMITS = { names: 16_384, bytes: 1024 * 1024 } as const;

const utf8 = new TextEncoder();
/** String.prototype.isWellFormed (Node 20+; not in this project's TypeScript lib). */
type WellFormed = { isWellFormed(): boolean };
const utf8Strict = new TextDecoder("utf-8", { fatal: true });

/** Throws the MalformedError of a packed batch (entry-pack.ts catches it). */
export const malformedPacked = (message: string): never => {
  throw new MalformedError(`packed entries: ${message}`);
};

const malformed = malformedPacked;

/**
 * The encoder's side of a name table: each name's index, and the bytes the decoder's side
 * holds (each name counted as its UTF-16 length, which bounds its UTF-8 length / 3).
 */
export class NameTable {
  readonly index = new Map<string, number>();
  bytes = 0;

  get size(): number {
    return this.index.size;
  }

  /** Room for a name of `length` UTF-16 units, with the decoder's bytes at most 3 per unit. */
  hasRoomFor(length: number): boolean {
    return (
      this.index.size < NAME_TABLE_LIMITS.names &&
      this.bytes + 3 * length <= NAME_TABLE_LIMITS.bytes
    );
  }

  add(name: string): number {
    const i = this.index.size;
    this.index.set(name, i);
    this.bytes += 3 * name.length;
    return i;
  }

  clear(): void {
    this.index.clear();
    this.bytes = 0;
  }
}

// ---- encode ----

/**
 * Writes one batch at a time into a buffer it reuses (it only grows). Byte fields of
 * BYTES_BY_REFERENCE_MIN or more are not copied in: finish() copies them once into the batch.
 */
export class PackWriter {
  private buf = new Uint8Array(64 * 1024);
  private pos = 0;
  /** Referenced byte fields: each goes at `at` of the written bytes (finish() splices them). */
  private refs: { at: number; data: Uint8Array }[] = [];
  private refBytes = 0;
  private readonly f32 = new Float32Array(1);
  private readonly f32Bytes = new Uint8Array(this.f32.buffer);

  begin(): void {
    this.pos = 0;
    if (this.refs.length > 0) this.refs = [];
    this.refBytes = 0;
  }

  /** Bytes written since begin(), referenced fields included. */
  get length(): number {
    return this.pos + this.refBytes;
  }

  /** The batch, in a buffer of its own. */
  finish(): Uint8Array {
    if (this.refs.length === 0) return this.buf.slice(0, this.pos);
    const out = new Uint8Array(this.pos + this.refBytes);
    this.copyTo(out, 0);
    return out;
  }

  /** The batch into `target` at `at` (room for `length` bytes there), not allocating. */
  copyTo(target: Uint8Array, at: number): void {
    if (this.refs.length === 0 && this.pos <= 64) {
      for (let i = 0; i < this.pos; i++) target[at + i] = this.buf[i]!;
      return;
    }
    let from = 0;
    let to = at;
    for (const r of this.refs) {
      target.set(this.buf.subarray(from, r.at), to);
      to += r.at - from;
      from = r.at;
      target.set(r.data, to);
      to += r.data.byteLength;
    }
    target.set(this.buf.subarray(from, this.pos), to);
  }

  private room(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + bytes) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.buf.subarray(0, this.pos));
    this.buf = grown;
  }

  u8(value: number): void {
    if (this.pos === this.buf.length) this.room(1);
    this.buf[this.pos++] = value;
  }

  /** A non-negative safe integer, 7 bits a byte, low bits first. */
  varint(value: number): void {
    if (this.pos + VARINT_BYTES_MAX > this.buf.length) this.room(VARINT_BYTES_MAX);
    const buf = this.buf;
    if ((value & 0x7f) === value) {
      buf[this.pos++] = value;
      return;
    }
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`packed varint ${value}`);
    let n = value;
    while (n >= 0x80) {
      buf[this.pos++] = (n % 0x80) | 0x80;
      n = Math.floor(n / 0x80);
    }
    buf[this.pos++] = n;
  }

  /** A uint32 as a varint; RangeError for anything else (the decoder would refuse it). */
  u32(value: number): void {
    if (value >>> 0 !== value) throw new RangeError(`packed u32 ${value}`);
    this.varint(value);
  }

  /** A signed 32-bit integer, zigzag-mapped to a varint; RangeError for anything else. */
  zigzag(value: number): void {
    if ((value | 0) !== value) throw new RangeError(`packed int32 ${value}`);
    this.varint(value >= 0 ? value * 2 : -value * 2 - 1);
  }

  bytes(data: Uint8Array): void {
    const n = data.byteLength;
    this.varint(n);
    if (n >= BYTES_BY_REFERENCE_MIN) {
      this.refs.push({ at: this.pos, data });
      this.refBytes += n;
      return;
    }
    this.room(n);
    if (n <= 16) for (let i = 0; i < n; i++) this.buf[this.pos + i] = data[i]!;
    else this.buf.set(data, this.pos);
    this.pos += n;
  }

  /** A float32 (RangeError for a number float32 cannot hold exactly: it would change). */
  float32(value: number): void {
    if (Math.fround(value) !== value && !Number.isNaN(value)) {
      throw new RangeError(`packed float32 ${value}`);
    }
    this.f32[0] = value;
    this.room(4);
    this.buf.set(this.f32Bytes, this.pos);
    this.pos += 4;
  }

  /** A string not interned: its UTF-8 length, then its UTF-8. */
  text(value: string): void {
    // Most strings here are short ASCII (session ids, kernel names): written a byte a unit.
    const n = value.length;
    if (n < 0x80) {
      this.room(1 + n);
      const buf = this.buf;
      const at = this.pos + 1;
      let i = 0;
      for (; i < n; i++) {
        const c = value.charCodeAt(i);
        if (c >= 0x80) break;
        buf[at + i] = c;
      }
      if (i === n) {
        buf[this.pos] = n;
        this.pos = at + n;
        return;
      }
    }
    this.utf8(value);
  }

  /** RangeError for a string UTF-8 cannot hold (a lone surrogate would change). */
  private utf8(value: string): void {
    if (!(value as unknown as WellFormed).isWellFormed())
      throw new RangeError("packed string with a lone surrogate");
    const maxBytes = value.length * 3;
    this.room(VARINT_BYTES_MAX + maxBytes);
    const lengthAt = this.pos;
    // The length goes first: written once the UTF-8 is, moved only when it takes > 1 byte.
    const { written } = utf8.encodeInto(value, this.buf.subarray(lengthAt + 1));
    if (written < 0x80) {
      this.buf[lengthAt] = written;
      this.pos = lengthAt + 1 + written;
      return;
    }
    const encoded = this.buf.slice(lengthAt + 1, lengthAt + 1 + written);
    this.varint(written);
    this.buf.set(encoded, this.pos);
    this.pos += written;
  }

  /**
   * A name interned in `table`: its index once known; the first time, the name itself, which
   * joins the table (inline: the decoder builds its table from the batches, in order) or is
   * only indexed (not inline: the caller keeps the table beside the bytes, as a log slab does).
   * A full table leaves the name out of it (a literal).
   */
  name(value: string, table: NameTable, inline: boolean): void {
    const known = table.index.get(value);
    if (known !== undefined) {
      this.varint(known + NAME_INDEX_BASE);
      return;
    }
    if (!table.hasRoomFor(value.length)) {
      this.varint(NAME_LITERAL);
      this.text(value);
      return;
    }
    const i = table.add(value);
    if (!inline) {
      this.varint(i + NAME_INDEX_BASE);
      return;
    }
    this.varint(NAME_NEW);
    this.text(value);
  }
}

// ---- decode ----

/** The decoder's side of a name table (a stream's, or a slab's kept beside its bytes). */
export interface Names {
  readonly list: string[];
  bytes: number;
}

export const emptyNames = (): Names => ({ list: [], bytes: 0 });

export class PackReader {
  private readonly buf: Uint8Array;
  private pos: number;
  private readonly end: number;
  private readonly names: Names;

  constructor(buf: Uint8Array, names: Names, from = 0, end = buf.length) {
    this.buf = buf;
    this.names = names;
    this.pos = from;
    this.end = end;
  }

  get done(): boolean {
    return this.pos === this.end;
  }

  u8(what: string): number {
    if (this.pos >= this.end) return malformed(`${what}: truncated`);
    return this.buf[this.pos++]!;
  }

  varint(what: string): number {
    const b0 = this.u8(what);
    if (b0 < 0x80) return b0;
    let value = b0 & 0x7f;
    let scale = 0x80;
    for (let i = 1; ; i++) {
      if (i === VARINT_BYTES_MAX) return malformed(`${what}: varint too long`);
      const b = this.u8(what);
      value += (b & 0x7f) * scale;
      if (b < 0x80) break;
      scale *= 0x80;
    }
    if (value > Number.MAX_SAFE_INTEGER) return malformed(`${what} ${value} too large`);
    return value;
  }

  u32(what: string): number {
    const value = this.varint(what);
    return value > U32_MAX ? malformed(`${what} ${value} is not a uint32`) : value;
  }

  zigzag(what: string): number {
    const z = this.varint(what);
    const value = z % 2 === 0 ? z / 2 : -(z + 1) / 2;
    if (value < -0x80000000 || value > 0x7fffffff) return malformed(`${what} is not an int32`);
    return value;
  }

  /** A count of items that each take at least one byte: never more than the bytes left. */
  count(what: string): number {
    const n = this.varint(what);
    return n > this.end - this.pos ? malformed(`${what} ${n}: more than the bytes left`) : n;
  }

  /**
   * A byte field: a copy when small; from BYTES_BY_REFERENCE_MIN a view into the batch (a DMA
   * payload is not copied again: the batch's buffer is the receive buffer of that one message).
   */
  bytes(what: string): Uint8Array {
    const length = this.varint(what);
    if (length > this.end - this.pos) return malformed(`${what}: truncated`);
    const at = this.pos;
    this.pos += length;
    return length >= BYTES_BY_REFERENCE_MIN
      ? this.buf.subarray(at, at + length)
      : this.buf.slice(at, at + length);
  }

  float32(what: string): number {
    if (this.end - this.pos < 4) return malformed(`${what}: truncated`);
    const view = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 4);
    this.pos += 4;
    return view.getFloat32(0, true);
  }

  text(what: string): string {
    const length = this.varint(what);
    if (length > this.end - this.pos) return malformed(`${what}: truncated`);
    const at = this.pos;
    this.pos += length;
    const buf = this.buf;
    let ascii = length <= 64;
    for (let i = 0; ascii && i < length; i++) ascii = buf[at + i]! < 0x80;
    if (ascii) return String.fromCharCode.apply(null, buf.subarray(at, at + length) as never);
    try {
      return utf8Strict.decode(buf.subarray(at, at + length));
    } catch {
      return malformed(`${what}: not UTF-8`);
    }
  }

  name(what: string): string {
    const ref = this.varint(what);
    if (ref >= NAME_INDEX_BASE) {
      return this.names.list[ref - NAME_INDEX_BASE] ?? malformed(`${what}: unknown name ${ref}`);
    }
    const value = this.text(what);
    if (ref === NAME_LITERAL) return value;
    const names = this.names;
    if (
      names.list.length >= NAME_TABLE_LIMITS.names ||
      names.bytes + value.length > NAME_TABLE_LIMITS.bytes
    ) {
      return malformed(`${what}: the name table is full`);
    }
    names.list.push(value);
    names.bytes += value.length;
    return value;
  }
}
