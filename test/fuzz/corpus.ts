// Valid messages of both ports, encoded: the seeds that test/fuzz mutates. Guest messages use
// credentials no tenant has (a stranger's); replication messages come from another cluster, an
// older epoch, or no hello at all, except where a target says otherwise.
import { create, toBinary } from "@bufbuild/protobuf";
import {
  type Call,
  EMPTY_DELTA,
  type Entry,
  EntryPacker,
  ErrorCode,
  encodeEntryBatchUnpacked,
  encodeFrame,
  encodePrimaryMessage,
  encodePulledChunk,
  encodeStandbyMessage,
  type PrimaryMessage,
  packEntries,
  REPLICATION_PROTOCOL_VERSION,
  type StandbyMessage,
  wire,
} from "@vgpu-ha/common";
import { FRAME, frameOf, PAGES_MAGIC, refusedPayload } from "@vgpu-ha/daemon";

export const CALLS: readonly Call[] = [
  { op: "contextCreate" },
  { op: "contextDestroy", context: 1 },
  { op: "boAlloc", context: 1, sizeBytes: 4096 },
  { op: "boFree", context: 1, bo: 1 },
  { op: "boMap", context: 1, bo: 1 },
  { op: "boUnmap", context: 1, bo: 1 },
  { op: "dmaWrite", context: 1, bo: 1, offset: 8, data: Uint8Array.of(1, 2, 3, 4) },
  { op: "dmaRead", context: 1, bo: 1, offset: 0, length: 16 },
  { op: "boCopy", context: 1, srcBo: 1, srcOffset: 0, dstBo: 2, dstOffset: 0, length: 8 },
  {
    op: "kernelLaunch",
    context: 1,
    kernel: "saxpy_f32",
    args: [
      { kind: "buffer", bo: 1 },
      { kind: "buffer", bo: 2 },
      { kind: "u32", value: 4 },
      { kind: "f32", value: 2 },
    ],
  },
  { op: "fence", context: 1 },
];

export const guestFrames = (first: number, calls: readonly Call[]) =>
  create(wire.GuestMessageSchema, {
    kind: {
      case: "frames",
      value: {
        frames: calls.map((call, i) =>
          encodeFrame({ number: first + i, body: { kind: "call", call } }),
        ),
      },
    },
  });

const storeFrame = create(wire.GuestMessageSchema, {
  kind: {
    case: "frames",
    value: {
      frames: [
        encodeFrame({
          number: 5,
          body: {
            kind: "stores",
            batch: {
              context: 1,
              bo: 1,
              offsets: [0, 8],
              widths: Uint8Array.of(4, 8),
              data: new Uint8Array(12).fill(5),
            },
          },
        }),
      ],
    },
  },
});

/** Guest messages a stranger (no such tenant, wrong tokens) might send. */
export const GUEST_SEEDS: readonly Uint8Array[] = [
  create(wire.GuestMessageSchema, {
    kind: { case: "open", value: { tenant: "a", token: "not-the-token" } },
  }),
  create(wire.GuestMessageSchema, {
    kind: { case: "open", value: { tenant: "mallory", token: "x", resumeSessionId: "s-1" } },
  }),
  create(wire.GuestMessageSchema, { kind: { case: "close", value: {} } }),
  create(wire.GuestMessageSchema, {}),
  guestFrames(1, CALLS),
  guestFrames(2 ** 40, CALLS.slice(0, 3)),
  storeFrame,
].map((m) => toBinary(wire.GuestMessageSchema, m));

/**
 * Frames messages for a session that has applied frames 1-4 (context 1, buffers 1 and 2): the
 * next numbers, repeats of applied ones, and stores.
 */
export const FRAME_SEEDS: readonly Uint8Array[] = [
  guestFrames(5, CALLS.slice(2)),
  guestFrames(5, [CALLS[4]!, CALLS[6]!, CALLS[9]!, CALLS[7]!]),
  guestFrames(3, CALLS.slice(6, 9)),
  storeFrame,
].map((m) => toBinary(wire.GuestMessageSchema, m));

const entries: Entry[] = [
  { seq: 1, body: { kind: "sessionOpen", sessionId: "s9", tenant: "a" } },
  {
    seq: 2,
    body: {
      kind: "call",
      sessionId: "s9",
      frame: 1,
      call: { op: "contextCreate" },
      handles: { ...EMPTY_DELTA, contextsCreated: [9] },
      result: { code: ErrorCode.OK, outputDigest: new Uint8Array(16) },
    },
  },
  {
    seq: 3,
    body: {
      kind: "mmioPages",
      pages: [
        {
          context: 1,
          bo: 1,
          pageIndex: 0,
          extents: [{ offsetInPage: 4, data: Uint8Array.of(1, 2) }],
        },
      ],
      frames: [{ sessionId: "s9", frame: 2, code: ErrorCode.OK, message: "" }],
    },
  },
  { seq: 4, body: { kind: "sessionClose", sessionId: "s9", reason: "idle" } },
  { seq: 5, body: { kind: "checkpoint", digest: "00", requestId: 1 } },
];

/** What a stranger might send a standby: another cluster, an older epoch, or no hello. */
export const STRANGER_SEEDS: readonly Uint8Array[] = (
  [
    { kind: "hello", epoch: 9, clusterId: "other", nodeId: "x", firstRetainedSeq: 1, lastSeq: 5 },
    { kind: "hello", epoch: 1, clusterId: "fuzz", nodeId: "x", firstRetainedSeq: 1, lastSeq: 5 },
    {
      kind: "hello",
      epoch: 9,
      clusterId: "fuzz",
      nodeId: "standby",
      firstRetainedSeq: 1,
      lastSeq: 5,
      protocolVersion: REPLICATION_PROTOCOL_VERSION,
    },
    { kind: "entries", epoch: 9, entries },
    { kind: "heartbeat", epoch: 9, sentUs: 5, lastSeq: 5, syncReplica: true },
    { kind: "handover", epoch: 9, lastSeq: 5, digest: "" },
  ] satisfies PrimaryMessage[]
).map((m) => toBinary(wire.PrimaryMessageSchema, encodePrimaryMessage(m)));

/** A snapshot's chunk 0 (its metadata, with cached replies of every kind), as primaries send it. */
export const META_CHUNK_SEEDS: readonly Uint8Array[] = [
  toBinary(
    wire.PrimaryMessageSchema,
    encodePrimaryMessage({
      kind: "snapshot",
      epoch: 5,
      chunk: {
        snapshotId: 12,
        atSeq: 40,
        index: 0,
        last: false,
        pages: [],
        meta: {
          nextContextHandle: 2,
          contexts: [
            {
              handle: 1,
              tenant: "fuzz",
              sessionId: "s-1",
              nextBoHandle: 3,
              fenceValue: 9,
              bos: [
                { handle: 1, sizeBytes: 8192, mapped: true },
                { handle: 2, sizeBytes: 4096, mapped: false },
              ],
            },
          ],
          sessions: [
            {
              sessionId: "s-1",
              tenant: "fuzz",
              lastFrame: 30,
              replies: [
                {
                  frame: 27,
                  result: { code: ErrorCode.OK, message: "", output: { kind: "fence", value: 9 } },
                },
                {
                  frame: 28,
                  result: {
                    code: ErrorCode.OK,
                    message: "",
                    output: { kind: "handle", handle: 2 },
                  },
                },
                {
                  frame: 29,
                  result: {
                    code: ErrorCode.OK,
                    message: "",
                    output: { kind: "data", data: new Uint8Array([1, 2, 3]) },
                  },
                },
                {
                  frame: 30,
                  result: {
                    code: ErrorCode.OUT_OF_BOUNDS,
                    message: "past the end",
                    output: { kind: "none" },
                  },
                },
              ],
            },
          ],
        },
      },
    }),
  ),
];

/** Entry batches of a primary (after its hello): packed, as primaries send them, and in the
 * unpacked form a standby also takes. */
export const ENTRY_SEEDS: readonly Uint8Array[] = [
  ...[
    { kind: "entries", epoch: 5, entries },
    { kind: "entries", epoch: 5, entries: entries.slice(1, 3) },
    { kind: "heartbeat", epoch: 5, sentUs: 5, lastSeq: 5, syncReplica: true },
  ].map((m) => toBinary(wire.PrimaryMessageSchema, encodePrimaryMessage(m as PrimaryMessage))),
  toBinary(
    wire.PrimaryMessageSchema,
    create(wire.PrimaryMessageSchema, {
      epoch: 5n,
      kind: { case: "entries", value: encodeEntryBatchUnpacked(entries) },
    }),
  ),
];

/** Packed entry batches (EntryBatch.packed) alone, for the packed decoder. */
export const PACKED_SEEDS: readonly Uint8Array[] = [
  packEntries(entries),
  packEntries(entries.slice(1, 3)),
  packEntries([]),
];

/**
 * A stream's batches: its first (which introduces the names: PACKED_STREAM_FIRST), then later
 * ones that name them by index, the seeds of hostile later batches.
 */
const stream = new EntryPacker();
export const PACKED_STREAM_FIRST: Uint8Array = stream.pack(entries);
export const PACKED_STREAM_SEEDS: readonly Uint8Array[] = [
  stream.pack(entries),
  stream.pack(entries.slice(1, 3)),
  stream.pack(entries.slice(2)),
];

export const STANDBY_SEEDS: readonly Uint8Array[] = (
  [
    {
      kind: "hello",
      epoch: 3,
      clusterId: "fuzz",
      nodeId: "standby",
      empty: false,
      lastAppliedSeq: 4,
      snapshotId: 0,
      snapshotChunk: 0,
      protocolVersion: REPLICATION_PROTOCOL_VERSION,
    },
    {
      kind: "ack",
      epoch: 3,
      receivedSeq: 4,
      appliedSeq: 4,
      snapshotId: 1,
      snapshotChunk: 2,
      heartbeatSentUs: 9,
      checkpoints: [{ requestId: 1, seq: 4, equal: true, digest: "ab" }],
    },
    {
      kind: "ack",
      epoch: 3,
      receivedSeq: 1_000_000,
      appliedSeq: 1_000_000, // more than the primary ever logged
      snapshotId: 0,
      snapshotChunk: 0,
      heartbeatSentUs: 10,
      checkpoints: [],
    },
    { kind: "resync", epoch: 3, reason: "gap", fromSeq: 5, detail: "got 7" },
    { kind: "error", epoch: 3, code: ErrorCode.STALE_EPOCH, message: "old" },
  ] satisfies StandbyMessage[]
).map((m) => toBinary(wire.StandbyMessageSchema, encodeStandbyMessage(m)));

/** The pages socket's two directions, valid (daemon/src/roles/snapshot-pull-frames.ts). */
export const PAGES_SEEDS: readonly Uint8Array[] = (() => {
  const chunk = toBinary(
    wire.PrimaryMessageSchema,
    encodePrimaryMessage({
      kind: "snapshot",
      epoch: 3,
      chunk: {
        snapshotId: 2,
        atSeq: 9,
        index: 1,
        last: true,
        meta: undefined,
        pages: [{ context: 1, bo: 2, firstPage: 0, data: new Uint8Array(64).fill(7) }],
      },
    }),
  );
  const hello = toBinary(
    wire.StandbyMessageSchema,
    encodeStandbyMessage({
      kind: "hello",
      epoch: 3,
      clusterId: "c",
      nodeId: "b",
      empty: true,
      lastAppliedSeq: 0,
      snapshotId: 2,
      snapshotChunk: 1,
      protocolVersion: REPLICATION_PROTOCOL_VERSION,
      pullsSnapshots: true,
    }),
  );
  const join = (...parts: Uint8Array[]) => Uint8Array.from(Buffer.concat([PAGES_MAGIC, ...parts]));
  return [
    join(frameOf(FRAME.accepted), frameOf(FRAME.chunk, chunk), frameOf(FRAME.end)),
    join(frameOf(FRAME.refused, refusedPayload(37, "pull of snapshot 2 chunk 1; sending none"))),
    join(frameOf(FRAME.hello, hello)),
  ];
})();

/**
 * Pulled chunks' payloads as the primary lays them out (wire/snapshot-pages-encode.ts), for
 * the in-place reader (daemon/src/roles/snapshot-pull-place.ts): several runs, odd sizes, zero
 * fields left out, none, and protobuf-es's own encoding of one.
 */
export const PLACED_SEEDS: readonly Uint8Array[] = (() => {
  const run = (bo: number, firstPage: number, bytes: number, fill: number) => ({
    context: 1,
    bo,
    firstPage,
    data: new Uint8Array(bytes).fill(fill),
  });
  const chunk = (index: number, last: boolean, pages: ReturnType<typeof run>[]) => ({
    snapshotId: 7,
    atSeq: 120,
    index,
    last,
    meta: undefined,
    pages,
  });
  return [
    encodePulledChunk(4, chunk(1, false, [run(2, 0, 96, 5), run(3, 9, 40, 6)])),
    encodePulledChunk(0, chunk(2, true, [run(0, 0, 33, 7)])),
    encodePulledChunk(4, chunk(3, true, [])),
    toBinary(
      wire.PrimaryMessageSchema,
      encodePrimaryMessage({
        kind: "snapshot",
        epoch: 4,
        chunk: chunk(1, false, [run(2, 1, 64, 9)]),
      }),
    ),
  ];
})();
