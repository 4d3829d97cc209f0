// Proves the replication codec is lossless for every message kind (domain → proto → bytes →
// proto → domain), that decoded bytes are copies detached from the receive buffer, and that
// malformed messages decode to MalformedError, never a throw (an over-long hello version or
// lineage too); and that a stream's own encoder and its request deserializer (chunk 0 as bytes
// of its own codec) give the same bytes and the same domain messages as the generated code.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import type { Entry } from "../core/entries.js";
import { EMPTY_DELTA } from "../core/entries.js";
import type { PrimaryMessage, StandbyMessage } from "../core/messages.js";
import type { SnapshotMeta } from "../core/snapshot.js";
import { ErrorCode } from "../errors.js";
import {
  EntryBatchSchema,
  PrimaryMessageSchema,
  ResyncReason,
  StandbyMessageSchema,
  type PrimaryMessage as WirePrimaryMessage,
} from "../gen/vgpu/v1/replication_pb.js";
import { MalformedError } from "./call-codec.js";
import {
  decodePrimaryMessage,
  decodePrimaryStreamBytes,
  decodeStandbyMessage,
  encodePrimaryMessage,
  encodeStandbyMessage,
  primaryDecoder,
  primaryEncoder,
} from "./replication-codec.js";

type AckMessage = Extract<StandbyMessage, { kind: "ack" }>;

const bytes = (...b: number[]) => new Uint8Array(b);
const digest = new Uint8Array(16).fill(7);
const frames = [
  { sessionId: "s1", frame: 4, code: ErrorCode.OK, message: "" },
  { sessionId: "s1", frame: 5, code: ErrorCode.BAD_STORE, message: "store out of range" },
];

const entries: Entry[] = [
  {
    seq: 1,
    body: {
      kind: "call",
      sessionId: "s1",
      frame: 2,
      call: {
        op: "kernelLaunch",
        context: 1,
        kernel: "saxpy_f32",
        args: [
          { kind: "buffer", bo: 2 },
          { kind: "u32", value: 4294967295 },
          { kind: "i32", value: -7 },
          { kind: "f32", value: Math.fround(0.1) },
        ],
      },
      handles: {
        contextsCreated: [1],
        contextsDestroyed: [9],
        bosAssigned: [{ context: 1, bo: 2 }],
        bosReleased: [{ context: 1, bo: 3 }],
      },
      result: { code: ErrorCode.OK, outputDigest: digest },
    },
  },
  {
    seq: 2,
    body: {
      kind: "call",
      sessionId: "s1",
      frame: 3,
      call: { op: "dmaWrite", context: 1, bo: 2, offset: 2 ** 40, data: bytes(1, 2, 3) },
      handles: EMPTY_DELTA,
      result: { code: ErrorCode.OUT_OF_BOUNDS, outputDigest: new Uint8Array() },
    },
  },
  {
    seq: 3,
    body: {
      kind: "mmioPages",
      pages: [
        {
          context: 1,
          bo: 2,
          pageIndex: 5,
          extents: [
            { offsetInPage: 0, data: bytes(1, 2) },
            { offsetInPage: 4000, data: bytes(3, 4, 5, 6) },
          ],
        },
      ],
      frames,
    },
  },
  {
    seq: 4,
    body: { kind: "mmioStore", context: 1, bo: 2, offset: 4096, data: bytes(9, 9), frames },
  },
  { seq: 5, body: { kind: "sessionOpen", sessionId: "s2", tenant: "acme" } },
  { seq: 6, body: { kind: "sessionClose", sessionId: "s2", reason: "guest" } },
  { seq: 7, body: { kind: "checkpoint", digest: "ab12", requestId: 42 } },
  { seq: 8, body: { kind: "sessionClose", sessionId: "s3", reason: "idle" } },
  { seq: 9, body: { kind: "sessionClose", sessionId: "s4", reason: "operator" } },
];

/** A primary message carrying one wire entry, as given. */
const withEntry = (entry: object) =>
  create(PrimaryMessageSchema, {
    epoch: 1n,
    kind: { case: "entries", value: { entries: [entry] } },
  });

const meta: SnapshotMeta = {
  nextContextHandle: 3,
  contexts: [
    {
      handle: 1,
      tenant: "acme",
      sessionId: "s1",
      nextBoHandle: 4,
      fenceValue: 17,
      bos: [
        { handle: 2, sizeBytes: 2 ** 33, mapped: true },
        { handle: 3, sizeBytes: 4096, mapped: false },
      ],
    },
  ],
  sessions: [
    {
      sessionId: "s1",
      tenant: "acme",
      lastFrame: 9,
      replies: [
        { frame: 6, result: { code: ErrorCode.OK, message: "", output: { kind: "none" } } },
        {
          frame: 7,
          result: { code: ErrorCode.OK, message: "", output: { kind: "handle", handle: 5 } },
        },
        {
          frame: 8,
          result: { code: ErrorCode.OK, message: "", output: { kind: "fence", value: 17 } },
        },
        {
          frame: 9,
          result: { code: ErrorCode.OK, message: "", output: { kind: "data", data: bytes(8, 9) } },
        },
        {
          frame: 10,
          result: { code: ErrorCode.UNKNOWN_BO, message: "no bo 7", output: { kind: "none" } },
        },
      ],
    },
  ],
};

const primaryMessages: PrimaryMessage[] = [
  { kind: "hello", epoch: 3, clusterId: "c", nodeId: "a", firstRetainedSeq: 10, lastSeq: 2 ** 50 },
  { kind: "entries", epoch: 3, entries },
  {
    kind: "entries",
    epoch: 3,
    entries: entries.slice(0, 1),
    lateResults: [
      { seq: 4, kind: "output", outputDigest: digest },
      { seq: 6, kind: "state", digest: "ab".repeat(32) },
    ],
  },
  { kind: "entries", epoch: 3, entries: [], lateResults: [{ seq: 9, kind: "state", digest: "c" }] },
  {
    kind: "snapshot",
    epoch: 3,
    chunk: { snapshotId: 11, atSeq: 99, index: 0, last: false, meta, pages: [] },
  },
  {
    kind: "snapshot",
    epoch: 3,
    chunk: {
      snapshotId: 11,
      atSeq: 99,
      index: 1,
      last: true,
      meta: undefined,
      pages: [
        { context: 1, bo: 2, firstPage: 0, data: new Uint8Array(8192).fill(1) },
        { context: 1, bo: 3, firstPage: 7, data: new Uint8Array(4096).fill(2) },
      ],
    },
  },
  {
    kind: "heartbeat",
    epoch: 3,
    sentUs: 123456789,
    lastSeq: 7,
    syncReplica: true,
    maintenancePaused: false,
  },
  {
    kind: "heartbeat",
    epoch: 3,
    sentUs: 1,
    lastSeq: 8,
    syncReplica: false,
    maintenancePaused: true,
  },
  {
    kind: "hello",
    epoch: 3,
    clusterId: "c",
    nodeId: "a",
    firstRetainedSeq: 1,
    lastSeq: 2,
    version: "0.2.0",
    protocolVersion: 2,
  },
  {
    kind: "hello",
    epoch: 3,
    clusterId: "c",
    nodeId: "a",
    firstRetainedSeq: 1,
    lastSeq: 2,
    version: "0.2.0",
    protocolVersion: 1,
    kernelContract: 2,
    device: "webgpu nvidia nvidia-h100-80gb-hbm3 (hopper, webgpu 0.6.2)",
    lineage: "4c1f6a2e-0b7d-4f7e-9a51-2d3c8e6b9f10",
  },
  {
    kind: "deviceFault",
    epoch: 4,
    reason: "a kernel ran past device.maxCallMs (2000 ms)",
    frames: [
      { sessionId: "s1", frame: 9, seq: 41 },
      { sessionId: "s2", frame: 2 ** 40, seq: 42 },
    ],
  },
  { kind: "deviceFault", epoch: 4, reason: "device thread exited", frames: [] },
  { kind: "entries", epoch: 3, entries: entries.slice(0, 1), primaryDoneSeq: 2 ** 40 },
  { kind: "entries", epoch: 3, entries: [], primaryDoneSeq: 0 },
];

const standbyMessages: StandbyMessage[] = [
  {
    kind: "hello",
    epoch: 4,
    clusterId: "c",
    nodeId: "b",
    empty: false,
    lastAppliedSeq: 77,
    snapshotId: 11,
    snapshotChunk: 3,
    lineage: "4c1f6a2e-0b7d-4f7e-9a51-2d3c8e6b9f10",
  },
  {
    kind: "hello",
    epoch: 4,
    clusterId: "c",
    nodeId: "b",
    empty: true,
    lastAppliedSeq: 0,
    snapshotId: 0,
    snapshotChunk: 0,
    version: "0.1.0",
    protocolVersion: 1,
  },
  {
    kind: "hello",
    epoch: 4,
    clusterId: "c",
    nodeId: "b",
    empty: true,
    lastAppliedSeq: 0,
    snapshotId: 0,
    snapshotChunk: 0,
    version: "0.1.0",
    protocolVersion: 1,
    kernelContract: 2,
    device: "model",
  },
  {
    kind: "ack",
    epoch: 4,
    receivedSeq: 90,
    appliedSeq: 80,
    snapshotId: 0,
    snapshotChunk: 0,
    heartbeatSentUs: 123456789,
    checkpoints: [
      { requestId: 42, seq: 7, equal: true, digest: "ab12" },
      { requestId: 43, seq: 9, equal: false, digest: "cd34" },
    ],
  },
  { kind: "resync", epoch: 4, reason: "gap", fromSeq: 81, detail: "expected 81, got 85" },
  { kind: "resync", epoch: 4, reason: "diverged", fromSeq: 0, detail: "digest mismatch" },
  { kind: "error", epoch: 4, code: ErrorCode.STALE_EPOCH, message: "epoch 3 < 4" },
];

const ackMessage = standbyMessages.find((m): m is AckMessage => m.kind === "ack")!;

const primaryBytes = (m: PrimaryMessage) => toBinary(PrimaryMessageSchema, encodePrimaryMessage(m));
const roundTripPrimary = (m: PrimaryMessage) =>
  decodePrimaryMessage(fromBinary(PrimaryMessageSchema, primaryBytes(m)));
const roundTripStandby = (m: StandbyMessage) =>
  decodeStandbyMessage(
    fromBinary(StandbyMessageSchema, toBinary(StandbyMessageSchema, encodeStandbyMessage(m))),
  );

describe("replication codec", () => {
  it.each(
    primaryMessages.map((m, i) => [i, m.kind, m] as const),
  )("round-trips primary message %i (%s)", (_i, _kind, m) => {
    expect(roundTripPrimary(m)).toEqual(m);
  });

  it("sends each primary message over a stream's encoder and deserializer as the generated code does", () => {
    const encode = primaryEncoder();
    const decode = primaryDecoder();
    for (const m of primaryMessages) {
      const out: unknown = encode(m);
      const sent =
        out instanceof Uint8Array ? out : toBinary(PrimaryMessageSchema, out as WirePrimaryMessage);
      // Chunk 0 goes as bytes of its own codec; every other kind as before.
      const isMeta = m.kind === "snapshot" && m.chunk.meta !== undefined;
      expect(out instanceof Uint8Array, m.kind).toBe(isMeta);
      expect(decode(decodePrimaryStreamBytes(sent))).toEqual(m);
      // Entry batches intern names per stream: their bytes are the stream's own.
      if (m.kind === "entries") continue;
      expect(Buffer.from(sent).equals(Buffer.from(primaryBytes(m))), m.kind).toBe(true);
      expect(decodePrimaryMessage(decodePrimaryStreamBytes(sent))).toEqual(m);
    }
  });

  it.each(entries.map((e) => [e.body.kind, e] as const))("round-trips a %s entry", (_k, e) => {
    expect(roundTripPrimary({ kind: "entries", epoch: 1, entries: [e] })).toEqual({
      kind: "entries",
      epoch: 1,
      entries: [e],
    });
  });

  it.each(
    standbyMessages.map((m, i) => [i, m.kind, m] as const),
  )("round-trips standby message %i (%s)", (_i, _kind, m) => {
    expect(roundTripStandby(m)).toEqual(m);
  });

  it("copies every decoded bytes field out of the receive buffer", () => {
    // fromBinary returns views into its input, as grpc's receive buffer does.
    const late = primaryMessages[2]!;
    const snapshot = primaryMessages[4]!;
    for (const m of [{ kind: "entries", epoch: 3, entries } as const, late, snapshot]) {
      const buffer = primaryBytes(m);
      const decoded = decodePrimaryMessage(fromBinary(PrimaryMessageSchema, buffer));
      buffer.fill(0xff);
      expect(decoded).toEqual(m);
    }
  });

  it("leaves snapshot buffer pages as views (the device copies them on the way in)", () => {
    const pages = primaryMessages[5]!;
    const buffer = primaryBytes(pages);
    const decoded = decodePrimaryMessage(fromBinary(PrimaryMessageSchema, buffer));
    expect(decoded).toEqual(pages);
    if (decoded instanceof Error || decoded.kind !== "snapshot") throw new Error("not a chunk");
    const data = decoded.chunk.pages[0]!.data;
    expect(data.buffer).toBe(buffer.buffer); // not copied: a page run can be a whole MiB
  });

  it("takes an ack without received_seq (an older standby) as received up to applied_seq", () => {
    const wire = encodeStandbyMessage({ ...ackMessage, receivedSeq: 0 });
    expect(decodeStandbyMessage(wire)).toMatchObject({ receivedSeq: 80, appliedSeq: 80 });
  });

  it("reports an ack received below applied, or a late result with both or no digest, as malformed", () => {
    const ack = encodeStandbyMessage({ ...ackMessage, receivedSeq: 79 });
    expect(decodeStandbyMessage(ack)).toBeInstanceOf(MalformedError);
    for (const late of [
      { seq: 4n, outputDigest: digest, stateDigest: "ab" },
      { seq: 4n, outputDigest: new Uint8Array(0), stateDigest: "" },
    ]) {
      const w = create(PrimaryMessageSchema, {
        epoch: 1n,
        kind: { case: "entries", value: create(EntryBatchSchema, { lateResults: [late] }) },
      });
      expect(decodePrimaryMessage(w)).toBeInstanceOf(MalformedError);
    }
  });

  it("reports messages without a kind as malformed", () => {
    expect(decodePrimaryMessage(create(PrimaryMessageSchema, { epoch: 1n }))).toBeInstanceOf(
      MalformedError,
    );
    expect(decodeStandbyMessage(create(StandbyMessageSchema, { epoch: 1n }))).toBeInstanceOf(
      MalformedError,
    );
  });

  it("reports an entry without a kind, or a call entry missing a part, as malformed", () => {
    const call = { op: { case: "fence" as const, value: { context: 1 } } };
    const callEntry = (value: object) => ({ seq: 1n, kind: { case: "call" as const, value } });
    for (const entry of [
      { seq: 1n },
      callEntry({ handles: {}, result: {} }),
      callEntry({ call, handles: {} }),
      callEntry({ call, result: {} }),
      callEntry({ call: {}, handles: {}, result: {} }),
    ]) {
      expect(decodePrimaryMessage(withEntry(entry))).toBeInstanceOf(MalformedError);
    }
    expect(
      decodePrimaryMessage(withEntry(callEntry({ call, handles: {}, result: {} }))),
    ).not.toBeInstanceOf(MalformedError);
  });

  it("reports a hello's version of more than 64 characters as malformed", () => {
    const hello = (version: string) =>
      create(StandbyMessageSchema, {
        epoch: 1n,
        kind: { case: "hello", value: { clusterId: "c", nodeId: "b", version } },
      });
    expect(decodeStandbyMessage(hello("1".repeat(64)))).not.toBeInstanceOf(MalformedError);
    expect(decodeStandbyMessage(hello("1".repeat(65)))).toBeInstanceOf(MalformedError);
  });

  it("reports a hello's lineage of more than 64 characters as malformed (either side's)", () => {
    const standby = (lineage: string) =>
      create(StandbyMessageSchema, {
        epoch: 1n,
        kind: { case: "hello", value: { clusterId: "c", nodeId: "b", lineage } },
      });
    const primary = (lineage: string) =>
      create(PrimaryMessageSchema, {
        epoch: 1n,
        kind: { case: "hello", value: { clusterId: "c", nodeId: "a", lineage } },
      });
    expect(decodeStandbyMessage(standby("x".repeat(64)))).not.toBeInstanceOf(MalformedError);
    expect(decodeStandbyMessage(standby("x".repeat(65)))).toBeInstanceOf(MalformedError);
    expect(decodePrimaryMessage(primary("x".repeat(64)))).not.toBeInstanceOf(MalformedError);
    expect(decodePrimaryMessage(primary("x".repeat(65)))).toBeInstanceOf(MalformedError);
    // An empty lineage (a build from before them) decodes to none.
    expect(decodeStandbyMessage(standby(""))).not.toHaveProperty("lineage");
  });

  it("reports an unknown session close reason as malformed", () => {
    const entry = {
      seq: 1n,
      kind: { case: "sessionClose" as const, value: { sessionId: "s", reason: 9 } },
    };
    expect(decodePrimaryMessage(withEntry(entry))).toBeInstanceOf(MalformedError);
  });

  it("reports 64-bit numbers beyond the safe range as malformed", () => {
    const huge = 2n ** 60n;
    expect(decodePrimaryMessage(create(PrimaryMessageSchema, { epoch: huge }))).toBeInstanceOf(
      MalformedError,
    );
    const entry = { seq: huge, kind: { case: "sessionClose" as const, value: { sessionId: "s" } } };
    expect(
      decodePrimaryMessage(
        create(PrimaryMessageSchema, {
          epoch: 1n,
          kind: { case: "entries", value: { entries: [entry] } },
        }),
      ),
    ).toBeInstanceOf(MalformedError);
    const reply = { frame: 1n, result: { output: { case: "fenceValue" as const, value: huge } } };
    expect(
      decodePrimaryMessage(
        create(PrimaryMessageSchema, {
          epoch: 1n,
          kind: {
            case: "snapshot",
            value: { meta: { sessions: [{ sessionId: "s", replies: [reply] }] } },
          },
        }),
      ),
    ).toBeInstanceOf(MalformedError);
  });

  it("reports a snapshot reply without a result as malformed", () => {
    const m = create(PrimaryMessageSchema, {
      epoch: 1n,
      kind: {
        case: "snapshot",
        value: { meta: { sessions: [{ sessionId: "s", replies: [{ frame: 1n }] }] } },
      },
    });
    expect(decodePrimaryMessage(m)).toBeInstanceOf(MalformedError);
  });

  it("reports an unspecified or unknown resync reason as malformed", () => {
    for (const reason of [ResyncReason.UNSPECIFIED, 7 as ResyncReason]) {
      const m = create(StandbyMessageSchema, {
        epoch: 1n,
        kind: { case: "resync", value: { reason, fromSeq: 1n } },
      });
      expect(decodeStandbyMessage(m)).toBeInstanceOf(MalformedError);
    }
  });
});
