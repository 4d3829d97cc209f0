// Converts the replication stream's wire messages (replication.proto) to and from the domain
// types at the edge. Decoding never throws: a missing part, an unknown enum value or an unsafe
// 64-bit number is a MalformedError. Bytes decoded from grpc are views into the receive buffer,
// and the receiver keeps entries and snapshot pages, so every decoded bytes field is copied.
// Entries are converted in entry-codec.ts, snapshot chunks in snapshot-codec.ts.
import { create, fromBinary } from "@bufbuild/protobuf";
import type { Entry } from "../core/entries.js";
import { LINEAGE_MAX_CHARS } from "../core/lineage.js";
import type {
  CheckpointResult,
  LateResult,
  PrimaryMessage,
  ResyncReason,
  StandbyMessage,
} from "../core/messages.js";
import type { AnnouncedVersion } from "../core/peer-version.js";
import {
  AckSchema,
  CheckpointResultSchema,
  DeviceFaultSchema,
  EntryBatchSchema,
  FaultedFrameSchema,
  HandoverSchema,
  HeartbeatSchema,
  LateResultSchema,
  PrimaryHelloSchema,
  PrimaryMessageSchema,
  ReplicationErrorSchema,
  ResyncRequestSchema,
  StandbyHelloSchema,
  StandbyMessageSchema,
  type CheckpointResult as WireCheckpointResult,
  type EntryBatch as WireEntryBatch,
  type LateResult as WireLateResult,
  type PrimaryMessage as WirePrimaryMessage,
  ResyncReason as WireResyncReason,
  type StandbyMessage as WireStandbyMessage,
} from "../gen/vgpu/v1/replication_pb.js";
import { type MalformedError, toSafe } from "./call-codec.js";
import { catching, malformed } from "./decode-guards.js";
import { decodeEntryBatch } from "./entry-codec.js";
import { EntryPacker, EntryUnpacker, packEntries } from "./entry-pack.js";
import { decodeChunk, encodeChunk } from "./snapshot-codec.js";
import { decodeMetaChunk, encodeMetaChunk, looksLikeMetaChunk } from "./snapshot-meta-bytes.js";

export { encodeEntryBatchUnpacked } from "./entry-codec.js";

const RESYNC_TO_WIRE = {
  gap: WireResyncReason.GAP,
  diverged: WireResyncReason.DIVERGED,
} as const satisfies Record<ResyncReason, WireResyncReason>;

// ---- primary → standby ----

/**
 * The encoder of one replication stream: its entry batches share the stream's name table
 * (entry-pack.ts), so the messages must go out in the order they were encoded, each once,
 * on one stream, decoded there by one primaryDecoder().
 */
export function primaryEncoder(): (m: PrimaryMessage) => WirePrimaryMessage {
  const packer = new EntryPacker();
  return (m) => {
    // A snapshot's chunk 0 as its bytes (snapshot-meta-bytes.ts): the stream's serializer
    // sends a Uint8Array as it is (grpc/service-adapter.ts).
    if (m.kind === "snapshot" && m.chunk.meta !== undefined && m.chunk.pages.length === 0) {
      return encodeMetaChunk(m.epoch, m.chunk) as unknown as WirePrimaryMessage;
    }
    return encodeWith(m, (entries) => packer.pack(entries));
  };
}

/** A message on its own (an entry batch with a name table of its own): tests and tools. */
export function encodePrimaryMessage(m: PrimaryMessage): WirePrimaryMessage {
  return encodeWith(m, packEntries);
}

type Pack = (entries: readonly Entry[]) => Uint8Array;

function encodeWith(m: PrimaryMessage, pack: Pack): WirePrimaryMessage {
  return create(PrimaryMessageSchema, { epoch: BigInt(m.epoch), kind: encodePrimaryKind(m, pack) });
}

function encodePrimaryKind(m: PrimaryMessage, pack: Pack): WirePrimaryMessage["kind"] {
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
          ...(m.lineage !== undefined ? { lineage: m.lineage } : {}),
        }),
      };
    case "entries":
      return {
        case: "entries",
        value: create(EntryBatchSchema, {
          packed: m.entries.length > 0 ? pack(m.entries) : new Uint8Array(0),
          lateResults: (m.lateResults ?? []).map(encodeLateResult),
          ...(m.primaryDoneSeq !== undefined ? { primaryDoneSeq: BigInt(m.primaryDoneSeq) } : {}),
        }),
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
    case "deviceFault":
      return {
        case: "deviceFault",
        value: create(DeviceFaultSchema, {
          reason: m.reason,
          frames: m.frames.map((f) =>
            create(FaultedFrameSchema, {
              sessionId: f.sessionId,
              frame: BigInt(f.frame),
              seq: BigInt(f.seq),
            }),
          ),
        }),
      };
  }
}

/** A stream message whose domain form was read straight from its bytes (chunk 0). */
const PREDECODED = Symbol("vgpu.predecoded");
type Predecoded = WirePrimaryMessage & { readonly [PREDECODED]?: PrimaryMessage };

/**
 * The replication stream's request deserializer (servers.ts): a snapshot's chunk 0 is read by
 * its own codec (snapshot-meta-bytes.ts) and carried, decoded, to primaryDecoder; every other
 * message (and a chunk 0 that codec leaves alone) by the generated code, as before.
 */
export function decodePrimaryStreamBytes(bytes: Uint8Array): WirePrimaryMessage {
  if (looksLikeMetaChunk(bytes)) {
    const m = decodeMetaChunk(bytes);
    if (m !== undefined) {
      const w = create(PrimaryMessageSchema, { epoch: BigInt(m.epoch) });
      return Object.assign(w, { [PREDECODED]: m });
    }
  }
  return fromBinary(PrimaryMessageSchema, bytes);
}

/** The decoder of one replication stream (see primaryEncoder). */
export function primaryDecoder(): (w: WirePrimaryMessage) => PrimaryMessage | MalformedError {
  const unpacker = new EntryUnpacker();
  return (w) => (w as Predecoded)[PREDECODED] ?? catching(() => decodePrimaryOrThrow(w, unpacker));
}

/** A message on its own (an entry batch with a name table of its own): tests and tools. */
export function decodePrimaryMessage(w: WirePrimaryMessage): PrimaryMessage | MalformedError {
  return (w as Predecoded)[PREDECODED] ?? catching(() => decodePrimaryOrThrow(w, undefined));
}

function decodePrimaryOrThrow(
  w: WirePrimaryMessage,
  unpacker: EntryUnpacker | undefined,
): PrimaryMessage {
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
        ...lineageOf(k.value.lineage),
      };
    case "entries":
      return decodeEntries(epoch, k.value, unpacker);
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
    case "deviceFault":
      return {
        kind: "deviceFault",
        epoch,
        reason: k.value.reason,
        frames: k.value.frames.map((f) => ({
          sessionId: f.sessionId,
          frame: toSafe(f.frame, "faulted frame"),
          seq: toSafe(f.seq, "faulted frame's seq"),
        })),
      };
    default:
      return malformed("primary message has no kind");
  }
}

function decodeEntries(
  epoch: number,
  w: WireEntryBatch,
  unpacker: EntryUnpacker | undefined,
): PrimaryMessage {
  const entries = decodeEntryBatch(w, unpacker);
  const done = w.primaryDoneSeq;
  return {
    kind: "entries",
    epoch,
    entries,
    ...(w.lateResults.length > 0 ? { lateResults: w.lateResults.map(decodeLateResult) } : {}),
    ...(done !== undefined ? { primaryDoneSeq: toSafe(done, "primary done seq") } : {}),
  };
}

function encodeLateResult(r: LateResult): WireLateResult {
  const seq = BigInt(r.seq);
  return r.kind === "output"
    ? create(LateResultSchema, { seq, outputDigest: r.outputDigest })
    : create(LateResultSchema, { seq, stateDigest: r.digest });
}

/** Exactly one of the two digests is set. */
function decodeLateResult(w: WireLateResult): LateResult {
  const seq = toSafe(w.seq, "late result seq");
  const output = w.outputDigest.byteLength > 0;
  if (output === (w.stateDigest !== "")) {
    return malformed(`late result of seq ${seq} must carry exactly one digest`);
  }
  return output
    ? { seq, kind: "output", outputDigest: new Uint8Array(w.outputDigest) }
    : { seq, kind: "state", digest: w.stateDigest };
}

// ---- standby → primary ----

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
          pullsSnapshots: m.pullsSnapshots ?? false,
          ...versionToWire(m),
          ...(m.lineage !== undefined ? { lineage: m.lineage } : {}),
        }),
      };
    case "ack":
      return {
        case: "ack",
        value: create(AckSchema, {
          receivedSeq: BigInt(m.receivedSeq),
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
        ...(k.value.pullsSnapshots ? { pullsSnapshots: true } : {}),
        ...versionOf(k.value),
        ...lineageOf(k.value.lineage),
      };
    case "ack": {
      const appliedSeq = toSafe(k.value.appliedSeq, "applied seq");
      const receivedSeq = toSafe(k.value.receivedSeq, "received seq");
      // A standby that does not send received_seq (0) has received what it applied.
      if (receivedSeq !== 0 && receivedSeq < appliedSeq) {
        return malformed(`ack of received seq ${receivedSeq} below applied seq ${appliedSeq}`);
      }
      return {
        kind: "ack",
        epoch,
        receivedSeq: Math.max(receivedSeq, appliedSeq),
        appliedSeq,
        snapshotId: toSafe(k.value.snapshotId, "snapshot id"),
        snapshotChunk: k.value.snapshotChunk,
        heartbeatSentUs: toSafe(k.value.heartbeatSentUs, "heartbeat send time"),
        checkpoints: k.value.checkpoints.map((c) => decodeCheckpointResult(c)),
        ...(k.value.handoverAccepted ? { handoverAccepted: true } : {}),
      };
    }
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

function decodeResyncReason(reason: WireResyncReason): ResyncReason {
  if (reason === WireResyncReason.GAP) return "gap";
  if (reason === WireResyncReason.DIVERGED) return "diverged";
  return malformed(`unknown resync reason ${reason}`);
}

/** A hello's version fields for the wire (absent: not set, as a build before them sent). */
function versionToWire(m: AnnouncedVersion): {
  version?: string;
  protocolVersion?: number;
  kernelContractVersion?: number;
  device?: string;
} {
  return {
    ...(m.version !== undefined ? { version: m.version } : {}),
    ...(m.protocolVersion !== undefined ? { protocolVersion: m.protocolVersion } : {}),
    ...(m.kernelContract !== undefined ? { kernelContractVersion: m.kernelContract } : {}),
    ...(m.device !== undefined ? { device: m.device } : {}),
  };
}

/** Longest device description a hello may carry. */
const MAX_DEVICE_CHARS = 256;

/**
 * A hello's version fields: "" and 0 (a build that did not say) are absent; a version of at
 * most 64 characters, a device description of at most MAX_DEVICE_CHARS.
 */
function versionOf(w: {
  version: string;
  protocolVersion: number;
  kernelContractVersion: number;
  device: string;
}): AnnouncedVersion {
  if (w.version.length > 64) malformed(`version of ${w.version.length} characters (at most 64)`);
  if (w.device.length > MAX_DEVICE_CHARS) {
    malformed(`device of ${w.device.length} characters (at most ${MAX_DEVICE_CHARS})`);
  }
  return {
    ...(w.version !== "" ? { version: w.version } : {}),
    ...(w.protocolVersion !== 0 ? { protocolVersion: w.protocolVersion } : {}),
    ...(w.kernelContractVersion !== 0 ? { kernelContract: w.kernelContractVersion } : {}),
    ...(w.device !== "" ? { device: w.device } : {}),
  };
}

/** A hello's lineage: absent when empty; at most LINEAGE_MAX_CHARS characters. */
function lineageOf(lineage: string): { lineage?: string } {
  if (lineage === "") return {};
  if (lineage.length > LINEAGE_MAX_CHARS) {
    malformed(`lineage of ${lineage.length} characters (at most ${LINEAGE_MAX_CHARS})`);
  }
  return { lineage };
}

/** A hello's lease key: copied out of the receive buffer; absent when empty; at most 64 bytes. */
function leaseKeyOf(key: Uint8Array): { leaseKey?: Uint8Array } {
  if (key.length === 0) return {};
  if (key.length > 64) malformed(`lease key of ${key.length} bytes (at most 64)`);
  return { leaseKey: new Uint8Array(key) };
}
