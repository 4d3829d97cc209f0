// Proves chunk 0's own codec (snapshot-meta-bytes.ts) against the generated code: for random
// metadata (zero and large values, empty and non-ASCII strings, every kind of reply output,
// error results) it writes exactly the bytes of toBinary(encodePrimaryMessage) and reads them
// back to the very domain message fromBinary + decodePrimaryMessage gives; for those bytes
// mutated at random (bytes flipped, cut, inserted) it either gives that same message or leaves
// them to the generated code (undefined), never another answer; and it leaves every other
// message (heartbeats, chunks of pages, a total_chunks_hint-bearing meta is still read) alone.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { CallResult } from "../calls.js";
import { ErrorCode } from "../core/errors.js";
import type { PrimaryMessage } from "../core/messages.js";
import type { SnapshotChunk } from "../core/snapshot.js";
import {
  PrimaryMessageSchema,
  SnapshotChunkSchema,
  SnapshotMetaSchema,
} from "../gen/vgpu/v1/replication_pb.js";
import { decodePrimaryMessage, encodePrimaryMessage } from "./replication-codec.js";
import { decodeMetaChunk, encodeMetaChunk } from "./snapshot-meta-bytes.js";

const u53 = fc.oneof(fc.constant(0), fc.nat(300), fc.maxSafeNat());
const u32 = fc.oneof(fc.constant(0), fc.nat(300), fc.nat({ max: 0xffffffff }));
const text = fc.oneof(
  fc.constant(""),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "grapheme" }),
);
const result: fc.Arbitrary<CallResult> = fc.record({
  code: fc.constantFrom(...Object.values(ErrorCode).filter((v) => typeof v === "number")),
  message: text,
  output: fc.oneof(
    fc.constant({ kind: "none" as const }),
    fc.record({ kind: fc.constant("handle" as const), handle: u32 }),
    fc.record({ kind: fc.constant("fence" as const), value: u53 }),
    fc.record({ kind: fc.constant("data" as const), data: fc.uint8Array({ maxLength: 40 }) }),
  ),
}) as fc.Arbitrary<CallResult>;
const meta = fc.record({
  nextContextHandle: u32,
  contexts: fc.array(
    fc.record({
      handle: u32,
      tenant: text,
      sessionId: text,
      nextBoHandle: u32,
      fenceValue: u53,
      bos: fc.array(fc.record({ handle: u32, sizeBytes: u53, mapped: fc.boolean() }), {
        maxLength: 4,
      }),
    }),
    { maxLength: 3 },
  ),
  sessions: fc.array(
    fc.record({
      sessionId: text,
      tenant: text,
      lastFrame: u53,
      replies: fc.array(fc.record({ frame: u53, result }), { maxLength: 12 }),
    }),
    { maxLength: 3 },
  ),
});
const message = fc.record({
  epoch: u53,
  chunk: fc.record({
    snapshotId: u53,
    atSeq: u53,
    index: u32,
    last: fc.boolean(),
    meta,
    pages: fc.constant([]),
  }),
});

const generated = (epoch: number, chunk: SnapshotChunk) =>
  toBinary(PrimaryMessageSchema, encodePrimaryMessage({ kind: "snapshot", epoch, chunk }));
const reference = (bytes: Uint8Array) => {
  try {
    return decodePrimaryMessage(fromBinary(PrimaryMessageSchema, bytes));
  } catch (e) {
    return e as Error; // fromBinary throws on bytes out of shape
  }
};

describe("chunk 0's codec", () => {
  it("writes the generated code's bytes and reads back its domain message", () => {
    fc.assert(
      fc.property(message, ({ epoch, chunk }) => {
        const bytes = encodeMetaChunk(epoch, chunk);
        expect(Buffer.from(bytes).equals(Buffer.from(generated(epoch, chunk)))).toBe(true);
        const mine = decodeMetaChunk(bytes);
        expect(mine).toBeDefined();
        expect(mine).toStrictEqual(reference(bytes));
      }),
      { numRuns: 300 },
    );
  });

  it("reads mutated bytes as the generated code does, or leaves them to it", () => {
    const mutated = message.chain(({ epoch, chunk }) => {
      const bytes = encodeMetaChunk(epoch, chunk);
      return fc
        .record({
          at: fc.nat(Math.max(0, bytes.byteLength - 1)),
          value: fc.nat(255),
          how: fc.constantFrom("set", "cut", "insert"),
        })
        .map(({ at, value, how }) => {
          const b = Array.from(bytes);
          if (how === "set") b[at] = value;
          else if (how === "cut") b.splice(at);
          else b.splice(at, 0, value);
          return Uint8Array.from(b);
        });
    });
    let read = 0;
    fc.assert(
      fc.property(mutated, (bytes) => {
        const mine = decodeMetaChunk(bytes);
        if (mine === undefined) return;
        read++;
        expect(mine).toStrictEqual(reference(bytes));
      }),
      { numRuns: 1000 },
    );
    expect(read).toBeGreaterThan(100); // most mutations still read: the comparison is real
  });

  it("reads a thousand fence replies, as a busy session's cache holds", () => {
    const replies = Array.from({ length: 4096 }, (_, i) => ({
      frame: 1000 + i,
      result: { code: ErrorCode.OK, message: "", output: { kind: "fence" as const, value: i } },
    }));
    const chunk: SnapshotChunk = {
      snapshotId: 7,
      atSeq: 90_000,
      index: 0,
      last: false,
      meta: {
        nextContextHandle: 2,
        contexts: [],
        sessions: [{ sessionId: "s", tenant: "t", lastFrame: 5095, replies }],
      },
      pages: [],
    };
    const bytes = encodeMetaChunk(3, chunk);
    expect(Buffer.from(bytes).equals(Buffer.from(generated(3, chunk)))).toBe(true);
    expect(decodeMetaChunk(bytes)).toStrictEqual({ kind: "snapshot", epoch: 3, chunk });
  });

  it("leaves other messages to the generated code", () => {
    const others: PrimaryMessage[] = [
      { kind: "heartbeat", epoch: 2, sentUs: 9, lastSeq: 4, syncReplica: true },
      {
        kind: "snapshot",
        epoch: 2,
        chunk: {
          snapshotId: 1,
          atSeq: 2,
          index: 3,
          last: false,
          meta: undefined,
          pages: [{ context: 1, bo: 1, firstPage: 0, data: new Uint8Array([1, 2]) }],
        },
      },
    ];
    for (const m of others) {
      expect(decodeMetaChunk(toBinary(PrimaryMessageSchema, encodePrimaryMessage(m)))).toBe(
        undefined,
      );
    }
    // A total_chunks_hint (set by no build now) is read past, as the generated code does.
    const hinted = create(PrimaryMessageSchema, {
      epoch: 1n,
      kind: {
        case: "snapshot",
        value: create(SnapshotChunkSchema, {
          snapshotId: 4n,
          meta: create(SnapshotMetaSchema, { nextContextHandle: 3, totalChunksHint: 12n }),
        }),
      },
    });
    const bytes = toBinary(PrimaryMessageSchema, hinted);
    expect(decodeMetaChunk(bytes)).toStrictEqual(reference(bytes));
  });
});
