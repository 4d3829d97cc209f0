// Converts log entries (Entry in replication.proto) to and from the domain types, in the
// unpacked form (repeated Entry) and as a batch, which is packed (entry-pack.ts) or not.
// Decoders throw MalformedError (decode-guards.ts) and copy every bytes field out of the
// receive buffer.
import { create } from "@bufbuild/protobuf";
import type { Call } from "../calls.js";
import type {
  Entry,
  EntryBody,
  FrameRecord,
  HandleDelta,
  PageExtent,
  PageWrite,
  ResultSummary,
  SessionCloseReason,
} from "../core/entries.js";
import { FrameSchema } from "../gen/vgpu/v1/guest_pb.js";
import {
  BoRefSchema,
  CallEntrySchema,
  CheckpointEntrySchema,
  EntryBatchSchema,
  EntrySchema,
  ExtentSchema,
  FrameRecordSchema,
  HandleDeltaSchema,
  MmioPagesEntrySchema,
  MmioStoreEntrySchema,
  PageWriteSchema,
  ResultSummarySchema,
  SessionCloseEntrySchema,
  SessionOpenEntrySchema,
  type BoRef as WireBoRef,
  type CallEntry as WireCallEntry,
  type Entry as WireEntry,
  type EntryBatch as WireEntryBatch,
  type Extent as WireExtent,
  type FrameRecord as WireFrameRecord,
  type HandleDelta as WireHandleDelta,
  type PageWrite as WirePageWrite,
  type ResultSummary as WireResultSummary,
  SessionCloseReason as WireSessionCloseReason,
} from "../gen/vgpu/v1/replication_pb.js";
import type { Call as WireCall } from "../gen/vgpu/v1/types_pb.js";
import { decodeFrame, encodeCall, MalformedError, toSafe } from "./call-codec.js";
import { copy, malformed, present } from "./decode-guards.js";
import { type EntryUnpacker, unpackEntries } from "./entry-pack.js";

const CLOSE_REASON_TO_WIRE = {
  guest: WireSessionCloseReason.GUEST,
  idle: WireSessionCloseReason.IDLE,
  operator: WireSessionCloseReason.OPERATOR,
} as const satisfies Record<SessionCloseReason, WireSessionCloseReason>;

// ---- encode ----

/**
 * A batch in the unpacked form (repeated Entry), which a standby also takes. Primaries send
 * packed batches; this form is the reference the packed one is tested against.
 */
export function encodeEntryBatchUnpacked(entries: readonly Entry[]): WireEntryBatch {
  return create(EntryBatchSchema, { entries: entries.map(encodeEntry) });
}

function encodeEntry(entry: Entry): WireEntry {
  return create(EntrySchema, { seq: BigInt(entry.seq), kind: encodeEntryBody(entry.body) });
}

function encodeEntryBody(body: EntryBody): WireEntry["kind"] {
  switch (body.kind) {
    case "call":
      return { case: "call", value: encodeCallEntry(body) };
    case "mmioPages":
      return {
        case: "mmioPages",
        value: create(MmioPagesEntrySchema, {
          pages: body.pages.map(encodePageWrite),
          frames: body.frames.map(encodeFrameRecord),
        }),
      };
    case "mmioStore":
      return {
        case: "mmioStore",
        value: create(MmioStoreEntrySchema, {
          context: body.context,
          bo: body.bo,
          offset: BigInt(body.offset),
          data: body.data,
          frames: body.frames.map(encodeFrameRecord),
        }),
      };
    case "sessionOpen":
      return {
        case: "sessionOpen",
        value: create(SessionOpenEntrySchema, { sessionId: body.sessionId, tenant: body.tenant }),
      };
    case "sessionClose":
      return {
        case: "sessionClose",
        value: create(SessionCloseEntrySchema, {
          sessionId: body.sessionId,
          reason: CLOSE_REASON_TO_WIRE[body.reason],
        }),
      };
    case "checkpoint":
      return {
        case: "checkpoint",
        value: create(CheckpointEntrySchema, {
          digest: body.digest,
          requestId: BigInt(body.requestId),
        }),
      };
  }
}

function encodeCallEntry(body: Extract<EntryBody, { kind: "call" }>): WireCallEntry {
  return create(CallEntrySchema, {
    sessionId: body.sessionId,
    frame: BigInt(body.frame),
    call: encodeCall(body.call),
    handles: encodeHandleDelta(body.handles),
    result: encodeResultSummary(body.result),
  });
}

function encodeHandleDelta(d: HandleDelta): WireHandleDelta {
  const boRef = (r: { context: number; bo: number }): WireBoRef =>
    create(BoRefSchema, { context: r.context, bo: r.bo });
  return create(HandleDeltaSchema, {
    contextsCreated: [...d.contextsCreated],
    contextsDestroyed: [...d.contextsDestroyed],
    bosAssigned: d.bosAssigned.map(boRef),
    bosReleased: d.bosReleased.map(boRef),
  });
}

function encodeResultSummary(r: ResultSummary): WireResultSummary {
  return create(ResultSummarySchema, { code: r.code, outputDigest: r.outputDigest });
}

function encodePageWrite(p: PageWrite): WirePageWrite {
  return create(PageWriteSchema, {
    context: p.context,
    bo: p.bo,
    pageIndex: p.pageIndex,
    extents: p.extents.map((e) =>
      create(ExtentSchema, { offsetInPage: e.offsetInPage, data: e.data }),
    ),
  });
}

function encodeFrameRecord(f: FrameRecord): WireFrameRecord {
  return create(FrameRecordSchema, {
    sessionId: f.sessionId,
    frame: BigInt(f.frame),
    code: f.code,
    message: f.message,
  });
}

// ---- decode ----

/**
 * `packed` (what a primary sends; through the stream's unpacker, or as a batch on its own) or
 * `entries`, never both; throws MalformedError.
 */
export function decodeEntryBatch(w: WireEntryBatch, unpacker?: EntryUnpacker): Entry[] {
  if (w.packed.length === 0) return w.entries.map((e) => decodeEntry(e));
  if (w.entries.length > 0) return malformed("entry batch both packed and not");
  const entries = unpacker ? unpacker.unpack(w.packed) : unpackEntries(w.packed);
  if (entries instanceof MalformedError) throw entries;
  return entries;
}

function decodeEntry(w: WireEntry): Entry {
  const seq = toSafe(w.seq, "entry seq");
  return { seq, body: decodeEntryBody(w.kind, seq) };
}

function decodeEntryBody(k: WireEntry["kind"], seq: number): EntryBody {
  switch (k.case) {
    case "call":
      return decodeCallEntry(k.value);
    case "mmioPages":
      return {
        kind: "mmioPages",
        pages: k.value.pages.map((p) => decodePageWrite(p)),
        frames: k.value.frames.map((f) => decodeFrameRecord(f)),
      };
    case "mmioStore":
      return {
        kind: "mmioStore",
        context: k.value.context,
        bo: k.value.bo,
        offset: toSafe(k.value.offset, "store offset"),
        data: copy(k.value.data),
        frames: k.value.frames.map((f) => decodeFrameRecord(f)),
      };
    case "sessionOpen":
      return { kind: "sessionOpen", sessionId: k.value.sessionId, tenant: k.value.tenant };
    case "sessionClose":
      return {
        kind: "sessionClose",
        sessionId: k.value.sessionId,
        reason: decodeCloseReason(k.value.reason),
      };
    case "checkpoint":
      return {
        kind: "checkpoint",
        digest: k.value.digest,
        requestId: toSafe(k.value.requestId, "checkpoint request id"),
      };
    default:
      return malformed(`entry ${seq} has no kind`);
  }
}

function decodeCallEntry(w: WireCallEntry): EntryBody {
  return {
    kind: "call",
    sessionId: w.sessionId,
    frame: toSafe(w.frame, "call entry frame"),
    call: decodeCall(present(w.call, "call entry's call")),
    handles: decodeHandleDelta(present(w.handles, "call entry's handle delta")),
    result: decodeResultSummary(present(w.result, "call entry's result")),
  };
}

/**
 * Reuses the call codec by wrapping the call in a frame (its decoder of a bare call is
 * private), then copies the one bytes field a call has.
 */
function decodeCall(w: WireCall): Call {
  const frame = decodeFrame(create(FrameSchema, { number: 1n, body: { case: "call", value: w } }));
  if (frame instanceof MalformedError) throw frame;
  if (frame.body.kind !== "call") return malformed("call entry's call is not a call");
  const call = frame.body.call;
  return call.op === "dmaWrite" ? { ...call, data: copy(call.data) } : call;
}

function decodeHandleDelta(w: WireHandleDelta): HandleDelta {
  const boRef = (r: WireBoRef) => ({ context: r.context, bo: r.bo });
  return {
    contextsCreated: [...w.contextsCreated],
    contextsDestroyed: [...w.contextsDestroyed],
    bosAssigned: w.bosAssigned.map(boRef),
    bosReleased: w.bosReleased.map(boRef),
  };
}

function decodeResultSummary(w: WireResultSummary): ResultSummary {
  return { code: w.code, outputDigest: copy(w.outputDigest) };
}

function decodePageWrite(w: WirePageWrite): PageWrite {
  const extent = (e: WireExtent): PageExtent => ({
    offsetInPage: e.offsetInPage,
    data: copy(e.data),
  });
  return { context: w.context, bo: w.bo, pageIndex: w.pageIndex, extents: w.extents.map(extent) };
}

function decodeFrameRecord(w: WireFrameRecord): FrameRecord {
  return {
    sessionId: w.sessionId,
    frame: toSafe(w.frame, "frame record frame"),
    code: w.code,
    message: w.message,
  };
}

function decodeCloseReason(reason: WireSessionCloseReason): SessionCloseReason {
  if (reason === WireSessionCloseReason.GUEST) return "guest";
  if (reason === WireSessionCloseReason.IDLE) return "idle";
  if (reason === WireSessionCloseReason.OPERATOR) return "operator";
  return malformed(`unknown session close reason ${reason}`);
}
