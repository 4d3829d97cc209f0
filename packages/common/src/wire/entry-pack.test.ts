// Proves the packed entry encoding is lossless and decodes to the very domain values the
// protobuf entry encoding does, for a random corpus of every entry kind, call op and kernel
// argument (fast-check), batch by batch and as a stream of batches sharing one name table;
// that a stream sends each name once, starts its table over when full, and beats protobuf on
// size for small calls; that large byte fields decode as views and small ones as copies; and
// that truncated, oversized or otherwise out-of-shape bytes decode to MalformedError.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { BoRef, Entry, EntryBody, FrameRecord, HandleDelta } from "../core/entries.js";
import { EMPTY_DELTA } from "../core/entries.js";
import { ErrorCode } from "../errors.js";
import { EntryBatchSchema, PrimaryMessageSchema } from "../gen/vgpu/v1/replication_pb.js";
import { MalformedError } from "./call-codec.js";
import {
  EntryPacker,
  EntryUnpacker,
  PACKED_ENTRIES_VERSION,
  packEntries,
  unpackEntries,
} from "./entry-pack.js";
import { NAME_TABLE_LIMITS } from "./packed-bytes.js";
import { decodePrimaryMessage, encodeEntryBatchUnpacked } from "./replication-codec.js";

const u32 = fc.nat({ max: 0xffffffff });
const safe = fc.oneof(fc.nat({ max: 1000 }), fc.nat({ max: Number.MAX_SAFE_INTEGER }));
// Now and then a field large enough to travel by reference (BYTES_BY_REFERENCE_MIN).
const data = fc.oneof(
  { weight: 12, arbitrary: fc.uint8Array({ maxLength: 40 }) },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 1020, maxLength: 1500 }) },
);
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

  it("decode a stream of batches through one table to the entries packed", () => {
    fc.assert(
      fc.property(fc.array(batchArb, { maxLength: 6 }), (batches) => {
        const packer = new EntryPacker();
        const unpacker = new EntryUnpacker();
        for (const entries of batches) {
          expect(unpacker.unpack(packer.pack(entries))).toEqual(entries);
        }
      }),
      { numRuns: 150 },
    );
  });

  it("send each name once per stream: a later batch carries only its index", () => {
    const packer = new EntryPacker();
    const unpacker = new EntryUnpacker();
    const first = packer.pack([fence(1, 1)]);
    const second = packer.pack([fence(2, 2)]);
    expect(first.byteLength - second.byteLength).toBeGreaterThanOrEqual(36);
    expect(unpacker.unpack(first)).toEqual([fence(1, 1)]);
    expect(unpacker.unpack(second)).toEqual([fence(2, 2)]);
    // Without the stream's first batch the name is unknown.
    expect(new EntryUnpacker().unpack(second)).toBeInstanceOf(MalformedError);
  });

  it("start the stream's table over when it is full, and still decode every batch", () => {
    const packer = new EntryPacker();
    const unpacker = new EntryUnpacker();
    const open = (seq: number): Entry => ({
      seq,
      body: { kind: "sessionOpen", sessionId: `session-${seq}`, tenant: "acme" },
    });
    let seq = 0;
    const batches = Math.ceil(NAME_TABLE_LIMITS.names / 1000) + 2;
    let resets = 0;
    for (let b = 0; b < batches; b++) {
      const entries = Array.from({ length: 1000 }, () => open(++seq));
      const packed = packer.pack(entries);
      if (b > 0 && packed[1] === 1) resets++;
      expect(unpacker.unpack(packed)).toEqual(entries);
    }
    expect(resets).toBeGreaterThanOrEqual(1);
  });

  it("decode large byte fields as views into the batch, small ones as copies", () => {
    const big = new Uint8Array(4096).map((_, i) => i);
    const entries: Entry[] = [
      {
        seq: 1,
        body: {
          kind: "call",
          sessionId: "s",
          frame: 1,
          call: { op: "dmaWrite", context: 1, bo: 2, offset: 0, data: big },
          handles: EMPTY_DELTA,
          result: { code: ErrorCode.OK, outputDigest: Uint8Array.of(1, 2) },
        },
      },
    ];
    const packed = packEntries(entries);
    const decoded = unpackEntries(packed);
    if (decoded instanceof MalformedError) throw decoded;
    expect(decoded).toEqual(entries);
    const body = decoded[0]!.body;
    if (body.kind !== "call" || body.call.op !== "dmaWrite") throw new Error("not a dmaWrite");
    expect(body.call.data.buffer).toBe(packed.buffer);
    expect(body.result.outputDigest.buffer).not.toBe(packed.buffer);
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
    const v = PACKED_ENTRIES_VERSION;
    const bad: Uint8Array[] = [
      new Uint8Array(),
      Uint8Array.of(v - 1, 1, 0), // version 1 (replication protocol 1)
      Uint8Array.of(v + 1, 1, 0),
      Uint8Array.of(v, 2, 0), // an unknown flag
      Uint8Array.of(v, 1, 200), // a count beyond the bytes left
      Uint8Array.of(v, 1, 1, 0, 1), // seq delta 0
      Uint8Array.of(v, 1, 1, 1, 99), // unknown kind
      Uint8Array.of(v, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1),
      Uint8Array.of(v, 1, 1, 1, 5, 7), // a name never introduced
      Uint8Array.of(v, 1, 1, 1, 5, 0, 2, 0xc3, 0x28), // not UTF-8
      Uint8Array.of(v, 1, 0, 0), // bytes after the last entry
    ];
    for (let cut = 1; cut < good.length; cut++) bad.push(good.subarray(0, cut));
    for (const bytes of bad) expect(unpackEntries(bytes)).toBeInstanceOf(MalformedError);
    expect(unpackEntries(good)).not.toBeInstanceOf(MalformedError);
  });

  it("refuse random bytes as malformed or decode them, never throwing", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (tail) => {
        const bytes = Uint8Array.of(PACKED_ENTRIES_VERSION, 1, ...tail);
        const decoded = unpackEntries(bytes);
        expect(decoded instanceof MalformedError || Array.isArray(decoded)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it("refuse a stream's name table beyond its bounds", () => {
    // sessionOpen entries, each introducing two one-letter names: one more than the table holds.
    const entries = NAME_TABLE_LIMITS.names / 2 + 1;
    const bytes = [PACKED_ENTRIES_VERSION, 1, ...varint(entries)];
    for (let i = 0; i < entries; i++) bytes.push(1, 4, 0, 1, 0x61, 0, 1, 0x62);
    const decoded = unpackEntries(Uint8Array.from(bytes));
    expect(decoded).toBeInstanceOf(MalformedError);
    expect((decoded as MalformedError).message).toContain("name table is full");
  });
});

function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return out;
}
