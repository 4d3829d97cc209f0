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
import { malformedPacked as malformed, PackReader, PackWriter } from "./packed-bytes.js";

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

// ---- encode ----

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
