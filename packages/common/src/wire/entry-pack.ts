// The compact encoding of a batch of log entries (EntryBatch.packed in replication.proto),
// specified in docs/replication.md#entry-encoding. Built for the hot path: one reused
// buffer, varints, names (session ids, tenants, kernel names) interned per stream: a name
// travels once per replication stream, then as its index (EntryPacker and EntryUnpacker hold
// the two sides of the stream's table). Decoding never trusts a length or a count: every read
// is bounds-checked and anything out of shape is a MalformedError. The same body encoding keeps
// the primary's retained log (core/log.ts) in slabs, with the slab's names beside its bytes.
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
import { invariant } from "../core/errors.js";
import { MalformedError } from "./malformed.js";
import {
  emptyNames,
  malformedPacked as malformed,
  type Names,
  NameTable,
  PackReader,
  PackWriter,
} from "./packed-bytes.js";

/**
 * The first byte of a packed batch: the version of this encoding. 2: names interned per
 * stream (1, replication protocol 1, interned every string per batch).
 */
export const PACKED_ENTRIES_VERSION = 2;

/** The batch's flags byte: the stream's name table is emptied before this batch. */
const FLAG_NAMES_RESET = 1;

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

// ---- encode ----

/**
 * The encoding side of one replication stream: batches must reach the stream's EntryUnpacker
 * in the order they were packed, each exactly once (a gRPC stream does that; a new stream
 * takes a new packer). Names introduced stay known until the table fills, when a batch says
 * to start over.
 */
export class EntryPacker {
  private readonly w = new PackWriter();
  private readonly names = new NameTable();

  /**
   * The entries in the compact encoding; seqs must increase (a log read's do). `alone`: the
   * batch starts a table of its own.
   */
  pack(entries: readonly Entry[], alone = false): Uint8Array {
    const w = this.w;
    w.begin();
    w.u8(PACKED_ENTRIES_VERSION);
    // Start over once the table has no room for another session id or two.
    const reset = alone || this.names.size === 0 || !this.names.hasRoomFor(256);
    if (reset) this.names.clear();
    w.u8(reset ? FLAG_NAMES_RESET : 0);
    w.varint(entries.length);
    let previous = 0;
    for (const entry of entries) {
      if (entry.seq <= previous) {
        invariant(false, `packed entries out of order: ${entry.seq} after ${previous}`);
      }
      w.varint(entry.seq - previous);
      previous = entry.seq;
      packBody(w, this.names, true, entry.body);
    }
    return w.finish();
  }
}

const oneBatch = new EntryPacker();

/** One batch on its own (a table of its own, which the batch resets): tests and fuzzing. */
export function packEntries(entries: readonly Entry[]): Uint8Array {
  return oneBatch.pack(entries, true);
}

/**
 * An entry's body into `w`, its names indexed in `names`: inline, the first use of a name
 * carries it (a stream); not inline, the caller keeps `names` beside the bytes (a log slab).
 */
export function packBody(w: PackWriter, names: NameTable, inline: boolean, body: EntryBody): void {
  w.u8(KIND_TAGS[body.kind]);
  switch (body.kind) {
    case "call":
      w.name(body.sessionId, names, inline);
      w.varint(body.frame);
      packCall(w, names, inline, body.call);
      packHandles(w, body.handles);
      w.zigzag(body.result.code);
      w.bytes(body.result.outputDigest);
      return;
    case "mmioPages":
      w.varint(body.pages.length);
      for (const p of body.pages) packPage(w, p);
      packFrames(w, names, inline, body.frames);
      return;
    case "mmioStore":
      w.u32(body.context);
      w.u32(body.bo);
      w.varint(body.offset);
      w.bytes(body.data);
      packFrames(w, names, inline, body.frames);
      return;
    case "sessionOpen":
      w.name(body.sessionId, names, inline);
      w.name(body.tenant, names, inline);
      return;
    case "sessionClose":
      w.name(body.sessionId, names, inline);
      w.u8(CLOSE_REASONS.indexOf(body.reason));
      return;
    case "checkpoint":
      w.text(body.digest);
      w.varint(body.requestId);
      return;
  }
}

function packCall(w: PackWriter, names: NameTable, inline: boolean, call: Call): void {
  w.u8(OP_TAGS.get(call.op)!);
  switch (call.op) {
    case "contextCreate":
      return;
    case "contextDestroy":
    case "fence":
      w.u32(call.context);
      return;
    case "boAlloc":
      w.u32(call.context);
      w.varint(call.sizeBytes);
      return;
    case "boFree":
    case "boMap":
    case "boUnmap":
      w.u32(call.context);
      w.u32(call.bo);
      return;
    case "dmaWrite":
      w.u32(call.context);
      w.u32(call.bo);
      w.varint(call.offset);
      w.bytes(call.data);
      return;
    case "dmaRead":
      w.u32(call.context);
      w.u32(call.bo);
      w.varint(call.offset);
      w.varint(call.length);
      return;
    case "boCopy":
      w.u32(call.context);
      w.u32(call.srcBo);
      w.varint(call.srcOffset);
      w.u32(call.dstBo);
      w.varint(call.dstOffset);
      w.varint(call.length);
      return;
    case "kernelLaunch":
      w.u32(call.context);
      w.name(call.kernel, names, inline);
      w.varint(call.args.length);
      for (const arg of call.args) packArg(w, arg);
      return;
  }
}

function packArg(w: PackWriter, arg: KernelArg): void {
  w.u8(ARG_TAGS[arg.kind]);
  switch (arg.kind) {
    case "buffer":
      w.u32(arg.bo);
      return;
    case "u32":
      w.u32(arg.value);
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
  const mask =
    (h.contextsCreated.length > 0 ? 1 : 0) |
    (h.contextsDestroyed.length > 0 ? 2 : 0) |
    (h.bosAssigned.length > 0 ? 4 : 0) |
    (h.bosReleased.length > 0 ? 8 : 0);
  w.u8(mask);
  if (mask === 0) return;
  if (mask & 1) packHandleList(w, h.contextsCreated);
  if (mask & 2) packHandleList(w, h.contextsDestroyed);
  if (mask & 4) packRefList(w, h.bosAssigned);
  if (mask & 8) packRefList(w, h.bosReleased);
}

function packHandleList(w: PackWriter, list: readonly number[]): void {
  w.varint(list.length);
  for (const handle of list) w.u32(handle);
}

function packRefList(w: PackWriter, list: readonly BoRef[]): void {
  w.varint(list.length);
  for (const ref of list) {
    w.u32(ref.context);
    w.u32(ref.bo);
  }
}

function packPage(w: PackWriter, p: PageWrite): void {
  w.u32(p.context);
  w.u32(p.bo);
  w.u32(p.pageIndex);
  w.varint(p.extents.length);
  for (const e of p.extents) {
    w.u32(e.offsetInPage);
    w.bytes(e.data);
  }
}

function packFrames(
  w: PackWriter,
  names: NameTable,
  inline: boolean,
  frames: readonly FrameRecord[],
): void {
  w.varint(frames.length);
  for (const f of frames) {
    w.name(f.sessionId, names, inline);
    w.varint(f.frame);
    w.zigzag(f.code);
    w.text(f.message);
  }
}

// ---- decode ----

/**
 * The decoding side of one replication stream: unpacks the stream's batches in order, keeping
 * the names they introduce. After a MalformedError the stream is over (its table may be half
 * updated): the link closes, and a new stream takes a new unpacker.
 */
export class EntryUnpacker {
  private readonly names: Names = emptyNames();

  /** A packed batch back to entries; MalformedError for anything out of shape. */
  unpack(packed: Uint8Array): Entry[] | MalformedError {
    try {
      return unpackOrThrow(new PackReader(packed, this.names), this.names);
    } catch (e) {
      if (e instanceof MalformedError) return e;
      throw e;
    }
  }
}

/** One batch on its own, with a table of its own: tests and fuzzing. */
export function unpackEntries(packed: Uint8Array): Entry[] | MalformedError {
  return new EntryUnpacker().unpack(packed);
}

function unpackOrThrow(r: PackReader, names: Names): Entry[] {
  const version = r.u8("version");
  if (version !== PACKED_ENTRIES_VERSION) malformed(`version ${version}`);
  const flags = r.u8("flags");
  if ((flags & ~FLAG_NAMES_RESET) !== 0) malformed(`flags ${flags}`);
  if (flags & FLAG_NAMES_RESET) {
    names.list.length = 0;
    names.bytes = 0;
  }
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

/** An entry's body from `r` (packBody's), for entry `seq`; throws MalformedError. */
export function unpackBody(r: PackReader, seq: number): EntryBody {
  const tag = r.u8("entry kind");
  switch (tag) {
    case KIND_TAGS.call:
      return {
        kind: "call",
        sessionId: r.name("session id"),
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
      return { kind: "sessionOpen", sessionId: r.name("session id"), tenant: r.name("tenant") };
    case KIND_TAGS.sessionClose:
      return {
        kind: "sessionClose",
        sessionId: r.name("session id"),
        reason: closeReason(r.u8("session close reason")),
      };
    case KIND_TAGS.checkpoint:
      return {
        kind: "checkpoint",
        digest: r.text("checkpoint digest"),
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
      const kernel = r.name("kernel");
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
      sessionId: r.name("frame record session"),
      frame: r.varint("frame record frame"),
      code: r.zigzag("frame record code"),
      message: r.text("frame record message"),
    });
  }
  return frames;
}

function closeReason(tag: number): SessionCloseReason {
  const reason = CLOSE_REASONS[tag];
  if (reason === undefined) return malformed(`unknown session close reason ${tag}`);
  return reason;
}
