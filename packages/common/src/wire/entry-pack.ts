// The compact encoding of a batch of log entries (EntryBatch.packed in replication.proto),
// specified in docs/replication.md#entry-encoding. Built for the hot path: one reused
// buffer, varints, strings interned per batch (the session id of every call entry is sent
// once per batch, not once per entry). Decoding never trusts a length or a count: every read
// is bounds-checked and anything out of shape is a MalformedError; bytes are copied out.
import { CALL_OPS, type Call, type CallOp, type KernelArg } from "../calls.js";
import type {
  BoRef,
  Entry,
  EntryBody,
  FrameRecord,
  HandleDelta,
  PageWrite,
  SessionCloseReason,
} from "../core/entries.js";
import { invariant } from "../errors.js";
import { MalformedError } from "./call-codec.js";

/** The first byte of a packed batch: the version of this encoding. */
export const PACKED_ENTRIES_VERSION = 1;

const KIND_TAGS = {
  call: 1,
  mmioPages: 2,
  mmioStore: 3,
  sessionOpen: 4,
  sessionClose: 5,
  checkpoint: 6,
} as const satisfies Record<EntryBody["kind"], number>;

const ARG_TAGS = { buffer: 0, u32: 1, i32: 2, f32: 3 } as const;

/** A session close's reason, one byte (the wire enum's numbers). */
const CLOSE_REASONS = [
  "guest",
  "idle",
  "operator",
] as const satisfies readonly SessionCloseReason[];

const OP_TAGS = new Map<CallOp, number>(CALL_OPS.map((op, i) => [op, i]));

const U32_MAX = 0xffffffff;
/** A varint carries at most 8 bytes (56 bits); values above 2^53 - 1 are refused. */
const VARINT_BYTES_MAX = 8;

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder("utf-8", { fatal: true });

// ---- encode ----

/** The writer behind packEntries, reused from batch to batch (it only grows). */
class PackWriter {
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

const writer = new PackWriter();

/** The entries in the compact encoding; seqs must increase (a log read's do). */
export function packEntries(entries: readonly Entry[]): Uint8Array {
  const w = writer;
  w.begin();
  w.u8(PACKED_ENTRIES_VERSION);
  w.varint(entries.length);
  let previous = 0;
  for (const entry of entries) {
    invariant(entry.seq > previous, `packed entries out of order: ${entry.seq} after ${previous}`);
    w.varint(entry.seq - previous);
    previous = entry.seq;
    packBody(w, entry.body);
  }
  return w.finish();
}

function packBody(w: PackWriter, body: EntryBody): void {
  w.u8(KIND_TAGS[body.kind]);
  switch (body.kind) {
    case "call":
      w.string(body.sessionId);
      w.varint(body.frame);
      packCall(w, body.call);
      packHandles(w, body.handles);
      w.zigzag(body.result.code);
      w.bytes(body.result.outputDigest);
      return;
    case "mmioPages":
      w.varint(body.pages.length);
      for (const p of body.pages) packPage(w, p);
      packFrames(w, body.frames);
      return;
    case "mmioStore":
      w.varint(body.context);
      w.varint(body.bo);
      w.varint(body.offset);
      w.bytes(body.data);
      packFrames(w, body.frames);
      return;
    case "sessionOpen":
      w.string(body.sessionId);
      w.string(body.tenant);
      return;
    case "sessionClose":
      w.string(body.sessionId);
      w.u8(CLOSE_REASONS.indexOf(body.reason));
      return;
    case "checkpoint":
      w.string(body.digest);
      w.varint(body.requestId);
      return;
  }
}

function packCall(w: PackWriter, call: Call): void {
  w.u8(OP_TAGS.get(call.op)!);
  switch (call.op) {
    case "contextCreate":
      return;
    case "contextDestroy":
    case "fence":
      w.varint(call.context);
      return;
    case "boAlloc":
      w.varint(call.context);
      w.varint(call.sizeBytes);
      return;
    case "boFree":
    case "boMap":
    case "boUnmap":
      w.varint(call.context);
      w.varint(call.bo);
      return;
    case "dmaWrite":
      w.varint(call.context);
      w.varint(call.bo);
      w.varint(call.offset);
      w.bytes(call.data);
      return;
    case "dmaRead":
      w.varint(call.context);
      w.varint(call.bo);
      w.varint(call.offset);
      w.varint(call.length);
      return;
    case "boCopy":
      w.varint(call.context);
      w.varint(call.srcBo);
      w.varint(call.srcOffset);
      w.varint(call.dstBo);
      w.varint(call.dstOffset);
      w.varint(call.length);
      return;
    case "kernelLaunch":
      w.varint(call.context);
      w.string(call.kernel);
      w.varint(call.args.length);
      for (const arg of call.args) packArg(w, arg);
      return;
  }
}

function packArg(w: PackWriter, arg: KernelArg): void {
  w.u8(ARG_TAGS[arg.kind]);
  switch (arg.kind) {
    case "buffer":
      w.varint(arg.bo);
      return;
    case "u32":
      w.varint(arg.value);
      return;
    case "i32":
      w.zigzag(arg.value);
      return;
    case "f32":
      w.float32(arg.value);
      return;
  }
}

/** A byte of which lists follow (bit i: list i is not empty), then each such list. */
function packHandles(w: PackWriter, h: HandleDelta): void {
  const lists = [h.contextsCreated, h.contextsDestroyed, h.bosAssigned, h.bosReleased] as const;
  let mask = 0;
  for (let i = 0; i < lists.length; i++) if (lists[i]!.length > 0) mask |= 1 << i;
  w.u8(mask);
  if (mask === 0) return;
  for (const list of [h.contextsCreated, h.contextsDestroyed]) {
    if (list.length === 0) continue;
    w.varint(list.length);
    for (const handle of list) w.varint(handle);
  }
  for (const list of [h.bosAssigned, h.bosReleased]) {
    if (list.length === 0) continue;
    w.varint(list.length);
    for (const ref of list) {
      w.varint(ref.context);
      w.varint(ref.bo);
    }
  }
}

function packPage(w: PackWriter, p: PageWrite): void {
  w.varint(p.context);
  w.varint(p.bo);
  w.varint(p.pageIndex);
  w.varint(p.extents.length);
  for (const e of p.extents) {
    w.varint(e.offsetInPage);
    w.bytes(e.data);
  }
}

function packFrames(w: PackWriter, frames: readonly FrameRecord[]): void {
  w.varint(frames.length);
  for (const f of frames) {
    w.string(f.sessionId);
    w.varint(f.frame);
    w.zigzag(f.code);
    w.string(f.message);
  }
}

// ---- decode ----

const malformed = (message: string): never => {
  throw new MalformedError(`packed entries: ${message}`);
};

class PackReader {
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

/** A packed batch back to entries; MalformedError for anything out of shape. */
export function unpackEntries(packed: Uint8Array): Entry[] | MalformedError {
  try {
    return unpackOrThrow(new PackReader(packed));
  } catch (e) {
    if (e instanceof MalformedError) return e;
    throw e;
  }
}

function unpackOrThrow(r: PackReader): Entry[] {
  const version = r.u8("version");
  if (version !== PACKED_ENTRIES_VERSION) malformed(`version ${version}`);
  const count = r.count("entry count");
  const entries: Entry[] = [];
  let seq = 0;
  for (let i = 0; i < count; i++) {
    const delta = r.varint("seq delta");
    if (delta === 0) malformed(`entry ${i}: seq does not increase`);
    seq += delta;
    if (seq > Number.MAX_SAFE_INTEGER) malformed(`entry ${i}: seq too large`);
    entries.push({ seq, body: unpackBody(r, seq) });
  }
  if (!r.done) malformed("bytes after the last entry");
  return entries;
}

function unpackBody(r: PackReader, seq: number): EntryBody {
  const tag = r.u8("entry kind");
  switch (tag) {
    case KIND_TAGS.call:
      return {
        kind: "call",
        sessionId: r.string("session id"),
        frame: r.varint("call entry frame"),
        call: unpackCall(r),
        handles: unpackHandles(r),
        result: { code: r.zigzag("result code"), outputDigest: r.bytes("output digest") },
      };
    case KIND_TAGS.mmioPages: {
      const pages: PageWrite[] = [];
      const n = r.count("page count");
      for (let i = 0; i < n; i++) pages.push(unpackPage(r));
      return { kind: "mmioPages", pages, frames: unpackFrames(r) };
    }
    case KIND_TAGS.mmioStore:
      return {
        kind: "mmioStore",
        context: r.u32("store context"),
        bo: r.u32("store bo"),
        offset: r.varint("store offset"),
        data: r.bytes("store data"),
        frames: unpackFrames(r),
      };
    case KIND_TAGS.sessionOpen:
      return { kind: "sessionOpen", sessionId: r.string("session id"), tenant: r.string("tenant") };
    case KIND_TAGS.sessionClose:
      return {
        kind: "sessionClose",
        sessionId: r.string("session id"),
        reason: closeReason(r.u8("session close reason")),
      };
    case KIND_TAGS.checkpoint:
      return {
        kind: "checkpoint",
        digest: r.string("checkpoint digest"),
        requestId: r.varint("checkpoint request id"),
      };
    default:
      return malformed(`entry ${seq} has unknown kind ${tag}`);
  }
}

function unpackCall(r: PackReader): Call {
  const tag = r.u8("call op");
  const op = CALL_OPS[tag] ?? malformed(`unknown call op ${tag}`);
  const context = op === "contextCreate" ? 0 : r.u32("context");
  switch (op) {
    case "contextCreate":
      return { op };
    case "contextDestroy":
    case "fence":
      return { op, context };
    case "boAlloc":
      return { op, context, sizeBytes: r.varint("size") };
    case "boFree":
    case "boMap":
    case "boUnmap":
      return { op, context, bo: r.u32("bo") };
    case "dmaWrite":
      return {
        op,
        context,
        bo: r.u32("bo"),
        offset: r.varint("offset"),
        data: r.bytes("data"),
      };
    case "dmaRead":
      return {
        op,
        context,
        bo: r.u32("bo"),
        offset: r.varint("offset"),
        length: r.varint("length"),
      };
    case "boCopy":
      return {
        op,
        context,
        srcBo: r.u32("source bo"),
        srcOffset: r.varint("source offset"),
        dstBo: r.u32("destination bo"),
        dstOffset: r.varint("destination offset"),
        length: r.varint("length"),
      };
    case "kernelLaunch": {
      const kernel = r.string("kernel");
      const args: KernelArg[] = [];
      const n = r.count("argument count");
      for (let i = 0; i < n; i++) args.push(unpackArg(r, i));
      return { op, context, kernel, args };
    }
  }
}

function unpackArg(r: PackReader, i: number): KernelArg {
  const tag = r.u8(`kernel argument ${i}`);
  switch (tag) {
    case ARG_TAGS.buffer:
      return { kind: "buffer", bo: r.u32("buffer argument") };
    case ARG_TAGS.u32:
      return { kind: "u32", value: r.u32("u32 argument") };
    case ARG_TAGS.i32:
      return { kind: "i32", value: r.zigzag("i32 argument") };
    case ARG_TAGS.f32:
      return { kind: "f32", value: r.float32("f32 argument") };
    default:
      return malformed(`kernel argument ${i} has unknown kind ${tag}`);
  }
}

function unpackHandles(r: PackReader): HandleDelta {
  const mask = r.u8("handle delta");
  if (mask > 0b1111) malformed(`handle delta mask ${mask}`);
  const handles = (bit: number, what: string): number[] => {
    const out: number[] = [];
    if ((mask & bit) === 0) return out;
    const n = r.count(what);
    for (let i = 0; i < n; i++) out.push(r.u32(what));
    return out;
  };
  const refs = (bit: number, what: string): BoRef[] => {
    const out: BoRef[] = [];
    if ((mask & bit) === 0) return out;
    const n = r.count(what);
    for (let i = 0; i < n; i++) out.push({ context: r.u32(what), bo: r.u32(what) });
    return out;
  };
  return {
    contextsCreated: handles(1, "contexts created"),
    contextsDestroyed: handles(2, "contexts destroyed"),
    bosAssigned: refs(4, "buffers assigned"),
    bosReleased: refs(8, "buffers released"),
  };
}

function unpackPage(r: PackReader): PageWrite {
  const context = r.u32("page context");
  const bo = r.u32("page bo");
  const pageIndex = r.u32("page index");
  const extents = [];
  const n = r.count("extent count");
  for (let i = 0; i < n; i++) {
    extents.push({ offsetInPage: r.u32("extent offset"), data: r.bytes("extent data") });
  }
  return { context, bo, pageIndex, extents };
}

function unpackFrames(r: PackReader): FrameRecord[] {
  const frames: FrameRecord[] = [];
  const n = r.count("frame record count");
  for (let i = 0; i < n; i++) {
    frames.push({
      sessionId: r.string("frame record session"),
      frame: r.varint("frame record frame"),
      code: r.zigzag("frame record code"),
      message: r.string("frame record message"),
    });
  }
  return frames;
}

function closeReason(tag: number): SessionCloseReason {
  const reason = CLOSE_REASONS[tag];
  if (reason === undefined) return malformed(`unknown session close reason ${tag}`);
  return reason;
}
