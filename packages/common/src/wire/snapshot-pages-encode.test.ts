// Proves the pull's own encoder (snapshot-pages-encode.ts) writes exactly the bytes of the
// generated code (toBinary of encodePrimaryMessage) for chunks of random shape — zero fields,
// large ids and seqs, empty and large pages, the last flag — and that they decode back to the
// same chunk, both when it copies the pages and when they were laid out in their wire form
// beforehand (pagesWire: the leading fields written into the room, the same bytes again on a
// second write); a chunk with metadata is refused (it never travels on a pull).
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  FieldWriter,
  lenBytes,
  PAGES_HEADROOM_BYTES,
  pagesMessageBytes,
} from "../core/pages-wire.js";
import type { SnapshotChunk } from "../core/snapshot.js";
import { PrimaryMessageSchema } from "../gen/vgpu/v1/replication_pb.js";
import { decodePrimaryMessage, encodePrimaryMessage } from "./replication-codec.js";
import { encodePulledChunk } from "./snapshot-pages-encode.js";

const u53 = fc.oneof(fc.constant(0), fc.nat(300), fc.maxSafeNat());
const u32 = fc.oneof(fc.constant(0), fc.nat(300), fc.nat({ max: 0xffffffff }));
const pages = fc.record({
  context: u32,
  bo: u32,
  firstPage: u32,
  data: fc.oneof(
    fc.uint8Array({ maxLength: 64 }),
    fc.uint8Array({ minLength: 5000, maxLength: 5000 }),
  ),
});
const chunk = fc.record({
  snapshotId: u53,
  atSeq: u53,
  index: fc.integer({ min: 1, max: 0xffffffff }),
  last: fc.boolean(),
  meta: fc.constant(undefined),
  pages: fc.array(pages, { maxLength: 4 }),
});

describe("encodePulledChunk", () => {
  it("writes the generated code's bytes, which decode to the same chunk", () => {
    fc.assert(
      fc.property(u53, chunk, (epoch, c: SnapshotChunk) => {
        const m = { kind: "snapshot", epoch, chunk: c } as const;
        const ours = Buffer.from(encodePulledChunk(epoch, c));
        const theirs = toBinary(PrimaryMessageSchema, encodePrimaryMessage(m));
        // (Buffer.equals: a deep equality of large byte arrays is slow in vitest)
        expect(ours.equals(theirs)).toBe(true);
        const back = decodePrimaryMessage(fromBinary(PrimaryMessageSchema, ours));
        if (back instanceof Error || back.kind !== "snapshot") throw new Error("not decoded");
        const { pages, ...rest } = back.chunk;
        expect(rest).toEqual({ ...c, pages: undefined, meta: undefined });
        expect(pages.map(({ data, ...p }) => ({ ...p, n: data.byteLength }))).toEqual(
          c.pages.map(({ data, ...p }) => ({ ...p, n: data.byteLength })),
        );
        expect(pages.every((p, i) => Buffer.from(p.data).equals(c.pages[i]!.data))).toBe(true);
      }),
      { numRuns: 100 },
    );
  });

  it("writes the same bytes around pages laid out in their wire form, without copying them", () => {
    fc.assert(
      fc.property(u53, chunk, (epoch, c: SnapshotChunk) => {
        const laid = layOut(c);
        const copied = Buffer.from(encodePulledChunk(epoch, c));
        const first = encodePulledChunk(epoch, laid);
        expect(first.buffer).toBe(laid.pagesWire!.buffer); // a view: no page copied
        expect(Buffer.from(first).equals(copied)).toBe(true);
        expect(Buffer.from(encodePulledChunk(epoch, laid)).equals(copied)).toBe(true);
      }),
      { numRuns: 100 },
    );
  });

  it("refuses a chunk with metadata", () => {
    const meta = { nextContextHandle: 1, contexts: [], sessions: [] };
    const c = { snapshotId: 1, atSeq: 1, index: 0, last: true, meta, pages: [] };
    expect(() => encodePulledChunk(1, c)).toThrow(/no metadata/);
  });
});

/** The chunk with its pages laid out as a device lays them out (core-snapshot.ts layOut). */
function layOut(c: SnapshotChunk): SnapshotChunk {
  const runs = c.pages.map((p) => ({ ...p, dataBytes: p.data.byteLength }));
  let size = PAGES_HEADROOM_BYTES;
  for (const r of runs) size += lenBytes(pagesMessageBytes(r));
  const w = new FieldWriter(new Uint8Array(size), PAGES_HEADROOM_BYTES);
  const pages = runs.map((r) => {
    w.pagesHead(r);
    w.buf.set(r.data, w.pos);
    w.pos += r.dataBytes;
    return { ...r, data: w.buf.subarray(w.pos - r.dataBytes, w.pos) };
  });
  return { ...c, pages, pagesWire: w.buf };
}
