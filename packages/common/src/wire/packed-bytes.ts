// The byte-level primitives of the packed entry encoding (entry-pack.ts,
// docs/replication.md#entry-encoding): varints, zigzag integers, length-prefixed bytes,
// little-endian float32 and strings interned per batch. The writer is reused and only grows;
// the reader bounds-checks every read and throws MalformedError for anything out of shape.
import { invariant } from "../errors.js";
import { MalformedError } from "./call-codec.js";

const U32_MAX = 0xffffffff;
/** A varint carries at most 8 bytes (56 bits); values above 2^53 - 1 are refused. */
const VARINT_BYTES_MAX = 8;

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder("utf-8", { fatal: true });

/** Throws the MalformedError of a packed batch (entry-pack.ts catches it). */
export const malformedPacked = (message: string): never => {
  throw new MalformedError(`packed entries: ${message}`);
};

const malformed = malformedPacked;

// ---- encode ----

/** The writer behind packEntries, reused from batch to batch (it only grows). */
export class PackWriter {
  private buf = new Uint8Array(64 * 1024);
  private pos = 0;
  private readonly strings = new Map<string, number>();
  private readonly f32 = new Float32Array(1);
  private readonly f32Bytes = new Uint8Array(this.f32.buffer);

  begin(): void {
    this.pos = 0;
    this.strings.clear();
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.pos);
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
    this.room(1);
    this.buf[this.pos++] = value;
  }

  /** A non-negative safe integer, 7 bits a byte, low bits first. */
  varint(value: number): void {
    invariant(Number.isSafeInteger(value) && value >= 0, `packed varint ${value}`);
    this.room(VARINT_BYTES_MAX);
    let n = value;
    while (n >= 0x80) {
      this.buf[this.pos++] = (n % 0x80) | 0x80;
      n = Math.floor(n / 0x80);
    }
    this.buf[this.pos++] = n;
  }

  /** A signed 32-bit integer, zigzag-mapped to a varint. */
  zigzag(value: number): void {
    this.varint(value >= 0 ? value * 2 : -value * 2 - 1);
  }

  bytes(data: Uint8Array): void {
    this.varint(data.byteLength);
    this.room(data.byteLength);
    this.buf.set(data, this.pos);
    this.pos += data.byteLength;
  }

  float32(value: number): void {
    this.f32[0] = value;
    this.room(4);
    this.buf.set(this.f32Bytes, this.pos);
    this.pos += 4;
  }

  /** 0 then the UTF-8 bytes for a string new to this batch, else its 1-based index. */
  string(value: string): void {
    const known = this.strings.get(value);
    if (known !== undefined) {
      this.varint(known);
      return;
    }
    this.strings.set(value, this.strings.size + 1);
    this.varint(0);
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
}

// ---- decode ----

export class PackReader {
  private readonly buf: Uint8Array;
  private pos = 0;
  private readonly strings: string[] = [];

  constructor(buf: Uint8Array) {
    this.buf = buf;
  }

  get done(): boolean {
    return this.pos === this.buf.length;
  }

  u8(what: string): number {
    if (this.pos >= this.buf.length) return malformed(`${what}: truncated`);
    return this.buf[this.pos++]!;
  }

  varint(what: string): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; ; i++) {
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
    return n > this.buf.length - this.pos ? malformed(`${what} ${n}: more than the bytes left`) : n;
  }

  bytes(what: string): Uint8Array {
    const length = this.varint(what);
    if (length > this.buf.length - this.pos) return malformed(`${what}: truncated`);
    const out = this.buf.slice(this.pos, this.pos + length);
    this.pos += length;
    return out;
  }

  float32(what: string): number {
    if (this.buf.length - this.pos < 4) return malformed(`${what}: truncated`);
    const view = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 4);
    this.pos += 4;
    return view.getFloat32(0, true);
  }

  string(what: string): string {
    const ref = this.varint(what);
    if (ref > 0) return this.strings[ref - 1] ?? malformed(`${what}: unknown string ${ref}`);
    const length = this.varint(what);
    if (length > this.buf.length - this.pos) return malformed(`${what}: truncated`);
    let value: string;
    try {
      value = utf8Strict.decode(this.buf.subarray(this.pos, this.pos + length));
    } catch {
      return malformed(`${what}: not UTF-8`);
    }
    this.pos += length;
    this.strings.push(value);
    return value;
  }
}
