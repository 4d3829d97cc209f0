// Proves the packed entry encoding is lossless and decodes to the very domain values the
// protobuf entry encoding does, for a random corpus of every entry kind, call op and kernel
// argument (fast-check); that it interns strings and beats protobuf on size for small calls;
// and that truncated, oversized or otherwise out-of-shape bytes decode to MalformedError.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { BoRef, Entry, EntryBody, FrameRecord, HandleDelta } from "../core/entries.js";
import { EMPTY_DELTA } from "../core/entries.js";
import { ErrorCode } from "../errors.js";
import { EntryBatchSchema, PrimaryMessageSchema } from "../gen/vgpu/v1/replication_pb.js";
import { MalformedError } from "./call-codec.js";
import { PACKED_ENTRIES_VERSION, packEntries, unpackEntries } from "./entry-pack.js";
import { decodePrimaryMessage, encodeEntryBatchUnpacked } from "./replication-codec.js";

const u32 = fc.nat({ max: 0xffffffff });
const safe = fc.oneof(fc.nat({ max: 1000 }), fc.nat({ max: Number.MAX_SAFE_INTEGER }));
const data = fc.uint8Array({ maxLength: 40 });
const text = fc.oneof(
  fc.constantFrom("", "s1", "acme"),
  fc.string(),
  fc.string({ unit: "grapheme", maxLength: 200 }),
);
const sessionId = fc.constantFrom(
  "0b7c6f1e-5d4a-4c1b-9a43-3e2f1d0c9b8a",
  "9f0e1d2c-3b4a-4596-8877-665544332211",
  "s",
);
const code = fc.constantFrom(...Object.values(ErrorCode).filter((v) => typeof v === "number"));

const argArb = fc.oneof(
  fc.record({ kind: fc.constant("buffer" as const), bo: u32 }),
  fc.record({ kind: fc.constant("u32" as const), value: u32 }),
  fc.record({
    kind: fc.constant("i32" as const),
    value: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
  }),
  fc.record({
    kind: fc.constant("f32" as const),
    value: fc.float().map((v) => Math.fround(v)),
  }),
);

const callArb = fc.oneof(
  fc.constant({ op: "contextCreate" as const }),
  fc.record({ op: fc.constant("contextDestroy" as const), context: u32 }),
  fc.record({ op: fc.constant("fence" as const), context: u32 }),
  fc.record({ op: fc.constant("boAlloc" as const), context: u32, sizeBytes: safe }),
  fc.record({
    op: fc.constantFrom("boFree" as const, "boMap" as const, "boUnmap" as const),
    context: u32,
    bo: u32,
  }),
  fc.record({ op: fc.constant("dmaWrite" as const), context: u32, bo: u32, offset: safe, data }),
  fc.record({
    op: fc.constant("dmaRead" as const),
    context: u32,
    bo: u32,
    offset: safe,
    length: safe,
  }),
  fc.record({
    op: fc.constant("boCopy" as const),
    context: u32,
    srcBo: u32,
    srcOffset: safe,
    dstBo: u32,
    dstOffset: safe,
    length: safe,
  }),
  fc.record({
    op: fc.constant("kernelLaunch" as const),
    context: u32,
    kernel: fc.constantFrom("saxpy_f32", "gemm_f32", "fill"),
    args: fc.array(argArb, { maxLength: 6 }),
  }),
);

const boRef: fc.Arbitrary<BoRef> = fc.record({ context: u32, bo: u32 });
const handlesArb: fc.Arbitrary<HandleDelta> = fc.oneof(
  fc.constant(EMPTY_DELTA),
  fc.record({
    contextsCreated: fc.array(u32, { maxLength: 3 }),
    contextsDestroyed: fc.array(u32, { maxLength: 3 }),
    bosAssigned: fc.array(boRef, { maxLength: 3 }),
    bosReleased: fc.array(boRef, { maxLength: 3 }),
  }),
);
const frameRecord: fc.Arbitrary<FrameRecord> = fc.record({
  sessionId,
  frame: safe,
  code,
  message: text,
});
const frames = fc.array(frameRecord, { maxLength: 3 });

const bodyArb: fc.Arbitrary<EntryBody> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("call" as const),
      sessionId,
      frame: safe,
      call: callArb,
      handles: handlesArb,
      result: fc.record({ code, outputDigest: data }),
    }),
  },
  fc.record({
    kind: fc.constant("mmioPages" as const),
    pages: fc.array(
      fc.record({
        context: u32,
        bo: u32,
        pageIndex: u32,
        extents: fc.array(fc.record({ offsetInPage: u32, data }), { maxLength: 3 }),
      }),
      { maxLength: 3 },
    ),
    frames,
  }),
  fc.record({
    kind: fc.constant("mmioStore" as const),
    context: u32,
    bo: u32,
    offset: safe,
    data,
    frames,
  }),
  fc.record({ kind: fc.constant("sessionOpen" as const), sessionId, tenant: text }),
  fc.record({
    kind: fc.constant("sessionClose" as const),
    sessionId,
    reason: fc.constantFrom("guest" as const, "idle" as const, "operator" as const),
  }),
  fc.record({ kind: fc.constant("checkpoint" as const), digest: text, requestId: safe }),
);

/** Entries with increasing seqs, as a log read returns them (consecutive or not). */
const batchArb: fc.Arbitrary<Entry[]> = fc
  .tuple(safe, fc.array(fc.tuple(fc.nat({ max: 3 }), bodyArb), { maxLength: 20 }))
  .map(([first, items]) => {
    let seq = Math.min(first, Number.MAX_SAFE_INTEGER - 100);
    return items.map(([gap, body]) => {
      seq += 1 + gap;
      return { seq, body };
    });
  });

/** The entries through the protobuf entry encoding and its decoder (the reference). */
function viaProtobuf(entries: readonly Entry[]) {
  const batch = fromBinary(
    EntryBatchSchema,
    toBinary(EntryBatchSchema, encodeEntryBatchUnpacked(entries)),
  );
  const message = create(PrimaryMessageSchema, {
    epoch: 1n,
    kind: { case: "entries", value: batch },
  });
  return decodePrimaryMessage(
    fromBinary(PrimaryMessageSchema, toBinary(PrimaryMessageSchema, message)),
  );
}

const fence = (seq: number, frame: number): Entry => ({
  seq,
  body: {
    kind: "call",
    sessionId: "0b7c6f1e-5d4a-4c1b-9a43-3e2f1d0c9b8a",
    frame,
    call: { op: "fence", context: 1 },
    handles: EMPTY_DELTA,
    result: { code: ErrorCode.OK, outputDigest: new Uint8Array(9).fill(2) },
  },
});

describe("packed entries", () => {
  it("round-trip every entry kind", () => {
    fc.assert(
      fc.property(batchArb, (entries) => {
        expect(unpackEntries(packEntries(entries))).toEqual(entries);
      }),
      { numRuns: 300 },
    );
  });

  it("decode to the same domain values as the protobuf entry encoding", () => {
    fc.assert(
      fc.property(batchArb, (entries) => {
        const reference = viaProtobuf(entries);
        if (reference instanceof MalformedError || reference.kind !== "entries") {
          throw new Error(`the protobuf reference failed: ${String(reference)}`);
        }
        expect(unpackEntries(packEntries(entries))).toEqual(reference.entries);
      }),
      { numRuns: 300 },
    );
  });

  it("copy bytes out of the packed buffer", () => {
    const entries: Entry[] = [
      {
        seq: 1,
        body: {
          kind: "mmioStore",
          context: 1,
          bo: 2,
          offset: 8,
          data: Uint8Array.of(5, 6),
          frames: [],
        },
      },
    ];
    const packed = packEntries(entries);
    const decoded = unpackEntries(packed);
    packed.fill(0xff);
    expect(decoded).toEqual(entries);
  });

  it("send each string once per batch: a small call takes about half the protobuf bytes", () => {
    const entries = Array.from({ length: 100 }, (_, i) => fence(i + 1, i + 1));
    const packed = packEntries(entries).byteLength;
    const protobuf = toBinary(EntryBatchSchema, encodeEntryBatchUnpacked(entries)).byteLength;
    expect(packed / 100).toBeLessThan(20);
    expect(protobuf / 100).toBeGreaterThan(60);
  });

  it("refuse out-of-shape bytes as malformed, never throwing", () => {
    const good = packEntries([fence(1, 1), fence(2, 2)]);
    const bad: Uint8Array[] = [
      new Uint8Array(),
      Uint8Array.of(PACKED_ENTRIES_VERSION + 1, 0),
      Uint8Array.of(PACKED_ENTRIES_VERSION, 200), // a count beyond the bytes left
      Uint8Array.of(PACKED_ENTRIES_VERSION, 1, 0, 1), // seq delta 0
      Uint8Array.of(PACKED_ENTRIES_VERSION, 1, 1, 99), // unknown kind
      Uint8Array.of(PACKED_ENTRIES_VERSION, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1),
      Uint8Array.of(PACKED_ENTRIES_VERSION, 1, 1, 5, 7), // a string never introduced
      Uint8Array.of(PACKED_ENTRIES_VERSION, 1, 1, 5, 0, 2, 0xc3, 0x28), // not UTF-8
      Uint8Array.of(PACKED_ENTRIES_VERSION, 0, 0), // bytes after the last entry
    ];
    for (let cut = 1; cut < good.length; cut++) bad.push(good.subarray(0, cut));
    for (const bytes of bad) expect(unpackEntries(bytes)).toBeInstanceOf(MalformedError);
    expect(unpackEntries(good)).not.toBeInstanceOf(MalformedError);
  });

  it("refuse random bytes as malformed or decode them, never throwing", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (tail) => {
        const bytes = Uint8Array.of(PACKED_ENTRIES_VERSION, ...tail);
        const decoded = unpackEntries(bytes);
        expect(decoded instanceof MalformedError || Array.isArray(decoded)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
