// Converts the replication stream's wire messages (replication.proto) to and from the domain
// types at the edge. Decoding never throws: a missing part, an unknown enum value or an unsafe
// 64-bit number is a MalformedError. Bytes decoded from grpc are views into the receive buffer,
// and the receiver keeps entries and snapshot pages, so every decoded bytes field is copied.
import { create } from "@bufbuild/protobuf";
import type { Call, CallResult } from "../calls.js";
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
import type {
  CheckpointResult,
  PrimaryMessage,
  ResyncReason,
  StandbyMessage,
} from "../core/messages.js";
import type { AnnouncedVersion } from "../core/peer-version.js";
import type {
  SnapshotBo,
  SnapshotChunk,
  SnapshotContext,
  SnapshotMeta,
  SnapshotPages,
  SnapshotSession,
} from "../core/snapshot.js";
import { FrameSchema } from "../gen/vgpu/v1/guest_pb.js";
import {
  AckSchema,
  BoRefSchema,
  CallEntrySchema,
  CheckpointEntrySchema,
  CheckpointResultSchema,
  EntryBatchSchema,
  EntrySchema,
  ExtentSchema,
  FrameRecordSchema,
  HandleDeltaSchema,
  HandoverSchema,
  HeartbeatSchema,
  MmioPagesEntrySchema,
  MmioStoreEntrySchema,
  PageWriteSchema,
  PrimaryHelloSchema,
  PrimaryMessageSchema,
  ReplicationErrorSchema,
  ResultSummarySchema,
  ResyncRequestSchema,
  SessionCloseEntrySchema,
  SessionOpenEntrySchema,
  SnapshotBoSchema,
  SnapshotChunkSchema,
  SnapshotContextSchema,
  SnapshotMetaSchema,
  SnapshotPagesSchema,
  SnapshotReplySchema,
  SnapshotSessionSchema,
  StandbyHelloSchema,
  StandbyMessageSchema,
  type BoRef as WireBoRef,
  type CallEntry as WireCallEntry,
  type CheckpointResult as WireCheckpointResult,
  type Entry as WireEntry,
  type EntryBatch as WireEntryBatch,
  type Extent as WireExtent,
  type FrameRecord as WireFrameRecord,
  type HandleDelta as WireHandleDelta,
  type PageWrite as WirePageWrite,
  type PrimaryMessage as WirePrimaryMessage,
  type ResultSummary as WireResultSummary,
  ResyncReason as WireResyncReason,
  SessionCloseReason as WireSessionCloseReason,
  type SnapshotBo as WireSnapshotBo,
  type SnapshotChunk as WireSnapshotChunk,
  type SnapshotContext as WireSnapshotContext,
  type SnapshotMeta as WireSnapshotMeta,
  type SnapshotPages as WireSnapshotPages,
  type SnapshotReply as WireSnapshotReply,
  type SnapshotSession as WireSnapshotSession,
  type StandbyMessage as WireStandbyMessage,
} from "../gen/vgpu/v1/replication_pb.js";
import type { Call as WireCall } from "../gen/vgpu/v1/types_pb.js";
import {
  decodeFrame,
  decodeResult,
  encodeCall,
  encodeResult,
  MalformedError,
  toSafe,
} from "./call-codec.js";
import { packEntries, unpackEntries } from "./entry-pack.js";

// The leaf decoders throw MalformedError (as toSafe does); the two public decoders catch it.
const malformed = (message: string): never => {
  throw new MalformedError(message);
};

function catching<T>(decode: () => T): T | MalformedError {
  try {
    return decode();
  } catch (e) {
    if (e instanceof MalformedError) return e;
    throw e;
  }
}

/** A copy of a bytes field, detached from the receive buffer it may be a view into. */
const copy = (view: Uint8Array): Uint8Array => new Uint8Array(view);

const present = <T>(value: T | undefined, what: string): T =>
  value === undefined ? malformed(`${what} missing`) : value;

const RESYNC_TO_WIRE = {
  gap: WireResyncReason.GAP,
  diverged: WireResyncReason.DIVERGED,
} as const satisfies Record<ResyncReason, WireResyncReason>;

const CLOSE_REASON_TO_WIRE = {
  guest: WireSessionCloseReason.GUEST,
  idle: WireSessionCloseReason.IDLE,
  operator: WireSessionCloseReason.OPERATOR,
} as const satisfies Record<SessionCloseReason, WireSessionCloseReason>;

// ---- primary → standby: encode ----

export function encodePrimaryMessage(m: PrimaryMessage): WirePrimaryMessage {
  return create(PrimaryMessageSchema, { epoch: BigInt(m.epoch), kind: encodePrimaryKind(m) });
}

function encodePrimaryKind(m: PrimaryMessage): WirePrimaryMessage["kind"] {
  switch (m.kind) {
    case "hello":
      return {
        case: "hello",
        value: create(PrimaryHelloSchema, {
          clusterId: m.clusterId,
          nodeId: m.nodeId,
          firstRetainedSeq: BigInt(m.firstRetainedSeq),
          lastSeq: BigInt(m.lastSeq),
          ...(m.leaseKey !== undefined ? { leaseKey: m.leaseKey } : {}),
          ...versionToWire(m),
        }),
      };
    case "entries":
      return {
        case: "entries",
        value: create(EntryBatchSchema, { packed: packEntries(m.entries) }),
      };
    case "snapshot":
      return { case: "snapshot", value: encodeChunk(m.chunk) };
    case "heartbeat":
      return {
        case: "heartbeat",
        value: create(HeartbeatSchema, {
          sentUs: BigInt(m.sentUs),
          lastSeq: BigInt(m.lastSeq),
          syncReplica: m.syncReplica,
          maintenancePaused: m.maintenancePaused === true,
        }),
      };
    case "handover":
      return {
        case: "handover",
        value: create(HandoverSchema, { lastSeq: BigInt(m.lastSeq), digest: m.digest }),
      };
  }
}

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

function encodeChunk(c: SnapshotChunk): WireSnapshotChunk {
  return create(SnapshotChunkSchema, {
    snapshotId: BigInt(c.snapshotId),
    atSeq: BigInt(c.atSeq),
    index: c.index,
    last: c.last,
    meta: c.meta === undefined ? undefined : encodeMeta(c.meta),
    pages: c.pages.map(encodePages),
  });
}

function encodeMeta(meta: SnapshotMeta): WireSnapshotMeta {
  return create(SnapshotMetaSchema, {
    nextContextHandle: meta.nextContextHandle,
    contexts: meta.contexts.map(encodeContext),
    sessions: meta.sessions.map(encodeSession),
  });
}

function encodeContext(c: SnapshotContext): WireSnapshotContext {
  return create(SnapshotContextSchema, {
    handle: c.handle,
    tenant: c.tenant,
    sessionId: c.sessionId,
    nextBoHandle: c.nextBoHandle,
    fenceValue: BigInt(c.fenceValue),
    bos: c.bos.map((b) =>
      create(SnapshotBoSchema, {
        handle: b.handle,
        sizeBytes: BigInt(b.sizeBytes),
        mapped: b.mapped,
      }),
    ),
  });
}

function encodeSession(s: SnapshotSession): WireSnapshotSession {
  return create(SnapshotSessionSchema, {
    sessionId: s.sessionId,
    tenant: s.tenant,
    lastFrame: BigInt(s.lastFrame),
    replies: s.replies.map((r) =>
      create(SnapshotReplySchema, { frame: BigInt(r.frame), result: encodeResult(r.result) }),
    ),
  });
}

function encodePages(p: SnapshotPages): WireSnapshotPages {
  return create(SnapshotPagesSchema, {
    context: p.context,
    bo: p.bo,
    firstPage: p.firstPage,
    data: p.data,
  });
}

// ---- primary → standby: decode ----

export function decodePrimaryMessage(w: WirePrimaryMessage): PrimaryMessage | MalformedError {
  return catching(() => decodePrimaryOrThrow(w));
}

function decodePrimaryOrThrow(w: WirePrimaryMessage): PrimaryMessage {
  const epoch = toSafe(w.epoch, "epoch");
  const k = w.kind;
  switch (k.case) {
    case "hello":
      return {
        kind: "hello",
        epoch,
        clusterId: k.value.clusterId,
        nodeId: k.value.nodeId,
        firstRetainedSeq: toSafe(k.value.firstRetainedSeq, "first retained seq"),
        lastSeq: toSafe(k.value.lastSeq, "last seq"),
        ...leaseKeyOf(k.value.leaseKey),
        ...versionOf(k.value),
      };
    case "entries":
      return { kind: "entries", epoch, entries: decodeEntryBatch(k.value) };
    case "snapshot":
      return { kind: "snapshot", epoch, chunk: decodeChunk(k.value) };
    case "heartbeat":
      return {
        kind: "heartbeat",
        epoch,
        sentUs: toSafe(k.value.sentUs, "heartbeat send time"),
        lastSeq: toSafe(k.value.lastSeq, "last seq"),
        syncReplica: k.value.syncReplica,
        maintenancePaused: k.value.maintenancePaused,
      };
    case "handover":
      return {
        kind: "handover",
        epoch,
        lastSeq: toSafe(k.value.lastSeq, "handover seq"),
        digest: k.value.digest,
      };
    default:
      return malformed("primary message has no kind");
  }
}

/** `packed` (what a primary sends) or `entries`, never both. */
function decodeEntryBatch(w: WireEntryBatch): Entry[] {
  if (w.packed.length === 0) return w.entries.map((e) => decodeEntry(e));
  if (w.entries.length > 0) return malformed("entry batch both packed and not");
  const entries = unpackEntries(w.packed);
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

/** `meta` is only on chunk 0; absent stays undefined. */
function decodeChunk(w: WireSnapshotChunk): SnapshotChunk {
  return {
    snapshotId: toSafe(w.snapshotId, "snapshot id"),
    atSeq: toSafe(w.atSeq, "snapshot seq"),
    index: w.index,
    last: w.last,
    meta: w.meta === undefined ? undefined : decodeMeta(w.meta),
    pages: w.pages.map((p) => decodePages(p)),
  };
}

function decodeMeta(w: WireSnapshotMeta): SnapshotMeta {
  return {
    nextContextHandle: w.nextContextHandle,
    contexts: w.contexts.map((c) => decodeContext(c)),
    sessions: w.sessions.map((s) => decodeSession(s)),
  };
}

function decodeContext(w: WireSnapshotContext): SnapshotContext {
  const bo = (b: WireSnapshotBo): SnapshotBo => ({
    handle: b.handle,
    sizeBytes: toSafe(b.sizeBytes, "buffer size"),
    mapped: b.mapped,
  });
  return {
    handle: w.handle,
    tenant: w.tenant,
    sessionId: w.sessionId,
    nextBoHandle: w.nextBoHandle,
    fenceValue: toSafe(w.fenceValue, "fence value"),
    bos: w.bos.map(bo),
  };
}

function decodeSession(w: WireSnapshotSession): SnapshotSession {
  return {
    sessionId: w.sessionId,
    tenant: w.tenant,
    lastFrame: toSafe(w.lastFrame, "session last frame"),
    replies: w.replies.map((r) => decodeReply(r)),
  };
}

/** decodeResult copies data output but neither requires the result nor checks the fence. */
function decodeReply(w: WireSnapshotReply): { frame: number; result: CallResult } {
  const result = present(w.result, "snapshot reply's result");
  if (result.output.case === "fenceValue") toSafe(result.output.value, "reply fence value");
  return { frame: toSafe(w.frame, "reply frame"), result: decodeResult(result) };
}

function decodePages(w: WireSnapshotPages): SnapshotPages {
  return { context: w.context, bo: w.bo, firstPage: w.firstPage, data: copy(w.data) };
}

// ---- standby → primary: encode ----

export function encodeStandbyMessage(m: StandbyMessage): WireStandbyMessage {
  return create(StandbyMessageSchema, { epoch: BigInt(m.epoch), kind: encodeStandbyKind(m) });
}

function encodeStandbyKind(m: StandbyMessage): WireStandbyMessage["kind"] {
  switch (m.kind) {
    case "hello":
      return {
        case: "hello",
        value: create(StandbyHelloSchema, {
          clusterId: m.clusterId,
          nodeId: m.nodeId,
          empty: m.empty,
          lastAppliedSeq: BigInt(m.lastAppliedSeq),
          snapshotId: BigInt(m.snapshotId),
          snapshotChunk: m.snapshotChunk,
          ...versionToWire(m),
        }),
      };
    case "ack":
      return {
        case: "ack",
        value: create(AckSchema, {
          appliedSeq: BigInt(m.appliedSeq),
          snapshotId: BigInt(m.snapshotId),
          snapshotChunk: m.snapshotChunk,
          heartbeatSentUs: BigInt(m.heartbeatSentUs),
          checkpoints: m.checkpoints.map(encodeCheckpointResult),
          handoverAccepted: m.handoverAccepted ?? false,
        }),
      };
    case "resync":
      return {
        case: "resync",
        value: create(ResyncRequestSchema, {
          reason: RESYNC_TO_WIRE[m.reason],
          fromSeq: BigInt(m.fromSeq),
          detail: m.detail,
        }),
      };
    case "error":
      return {
        case: "error",
        value: create(ReplicationErrorSchema, { code: m.code, message: m.message }),
      };
  }
}

function encodeCheckpointResult(c: CheckpointResult): WireCheckpointResult {
  return create(CheckpointResultSchema, {
    requestId: BigInt(c.requestId),
    seq: BigInt(c.seq),
    equal: c.equal,
    digest: c.digest,
  });
}

// ---- standby → primary: decode ----

export function decodeStandbyMessage(w: WireStandbyMessage): StandbyMessage | MalformedError {
  return catching(() => decodeStandbyOrThrow(w));
}

function decodeStandbyOrThrow(w: WireStandbyMessage): StandbyMessage {
  const epoch = toSafe(w.epoch, "epoch");
  const k = w.kind;
  switch (k.case) {
    case "hello":
      return {
        kind: "hello",
        epoch,
        clusterId: k.value.clusterId,
        nodeId: k.value.nodeId,
        empty: k.value.empty,
        lastAppliedSeq: toSafe(k.value.lastAppliedSeq, "last applied seq"),
        snapshotId: toSafe(k.value.snapshotId, "snapshot id"),
        snapshotChunk: k.value.snapshotChunk,
        ...versionOf(k.value),
      };
    case "ack":
      return {
        kind: "ack",
        epoch,
        appliedSeq: toSafe(k.value.appliedSeq, "applied seq"),
        snapshotId: toSafe(k.value.snapshotId, "snapshot id"),
        snapshotChunk: k.value.snapshotChunk,
        heartbeatSentUs: toSafe(k.value.heartbeatSentUs, "heartbeat send time"),
        checkpoints: k.value.checkpoints.map((c) => decodeCheckpointResult(c)),
        ...(k.value.handoverAccepted ? { handoverAccepted: true } : {}),
      };
    case "resync":
      return {
        kind: "resync",
        epoch,
        reason: decodeResyncReason(k.value.reason),
        fromSeq: toSafe(k.value.fromSeq, "resync from seq"),
        detail: k.value.detail,
      };
    case "error":
      return { kind: "error", epoch, code: k.value.code, message: k.value.message };
    default:
      return malformed("standby message has no kind");
  }
}

function decodeCheckpointResult(w: WireCheckpointResult): CheckpointResult {
  return {
    requestId: toSafe(w.requestId, "checkpoint request id"),
    seq: toSafe(w.seq, "checkpoint seq"),
    equal: w.equal,
    digest: w.digest,
  };
}

function decodeCloseReason(reason: WireSessionCloseReason): SessionCloseReason {
  if (reason === WireSessionCloseReason.GUEST) return "guest";
  if (reason === WireSessionCloseReason.IDLE) return "idle";
  if (reason === WireSessionCloseReason.OPERATOR) return "operator";
  return malformed(`unknown session close reason ${reason}`);
}

function decodeResyncReason(reason: WireResyncReason): ResyncReason {
  if (reason === WireResyncReason.GAP) return "gap";
  if (reason === WireResyncReason.DIVERGED) return "diverged";
  return malformed(`unknown resync reason ${reason}`);
}

/** A hello's version fields for the wire (absent: not set, as a build before them sent). */
function versionToWire(m: AnnouncedVersion): { version?: string; protocolVersion?: number } {
  return {
    ...(m.version !== undefined ? { version: m.version } : {}),
    ...(m.protocolVersion !== undefined ? { protocolVersion: m.protocolVersion } : {}),
  };
}

/** A hello's version fields: "" and 0 (a build that did not say) are absent; at most 64 chars. */
function versionOf(w: { version: string; protocolVersion: number }): AnnouncedVersion {
  if (w.version.length > 64) malformed(`version of ${w.version.length} characters (at most 64)`);
  return {
    ...(w.version !== "" ? { version: w.version } : {}),
    ...(w.protocolVersion !== 0 ? { protocolVersion: w.protocolVersion } : {}),
  };
}

/** A hello's lease key: copied out of the receive buffer; absent when empty; at most 64 bytes. */
function leaseKeyOf(key: Uint8Array): { leaseKey?: Uint8Array } {
  if (key.length === 0) return {};
  if (key.length > 64) malformed(`lease key of ${key.length} bytes (at most 64)`);
  return { leaseKey: new Uint8Array(key) };
}
