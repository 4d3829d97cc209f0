// Proves the in-place chunk reader (snapshot-pull-place.ts): for random pulled chunks, encoded
// as the primary encodes them and read through a FrameReader in random splits, the message it
// makes equals protobuf's decode of the same bytes, every run it was given a placement for is
// in that memory (and only there: the receive buffer keeps heads), the others view the receive
// buffer; a placement that stops being live mid-run stops the reader before another byte is
// written there; malformed or foreign layouts are refused, never thrown; and any corruption of
// a chunk's bytes gives an Error or a message, never an exception.
import { fromBinary } from "@bufbuild/protobuf";
import {
  decodePrimaryMessage,
  encodePulledChunk,
  type PagesPlacement,
  type PagesPlacer,
  type PrimaryMessage,
  type SnapshotChunk,
  type SnapshotPages,
  wire,
} from "@vgpu-ha/common";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FRAME, FrameError, FrameReader, frameOf, PAGES_MAGIC } from "./snapshot-pull-frames.js";
import { HEAD_READ_BYTES, PlacedChunkReader } from "./snapshot-pull-place.js";

const PAGE = 4096;

interface Made {
  readonly chunk: SnapshotChunk;
  readonly epoch: number;
  /** Per run: whether the placer places it. */
  readonly place: readonly boolean[];
  /** Read sizes for the socket, cycled. */
  readonly steps: readonly number[];
}

const runArb = fc.record({
  context: fc.nat({ max: 5 }),
  bo: fc.nat({ max: 300 }),
  firstPage: fc.nat({ max: 70_000 }),
  // Whole pages as the primary sends, and odd sizes the reader must take as well.
  bytes: fc.oneof(
    fc.integer({ min: 1, max: 5 }).map((n) => n * PAGE),
    fc.integer({ min: 0, max: 300 }),
  ),
  seed: fc.nat({ max: 250 }),
});

const madeArb: fc.Arbitrary<Made> = fc
  .record({
    epoch: fc.oneof(fc.constant(0), fc.nat({ max: 2 ** 40 })),
    snapshotId: fc.oneof(fc.constant(0), fc.nat({ max: 2 ** 45 })),
    atSeq: fc.nat({ max: 2 ** 50 }),
    index: fc.integer({ min: 1, max: 2 ** 32 - 1 }),
    last: fc.boolean(),
    runs: fc.array(runArb, { maxLength: 6 }),
    place: fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
    steps: fc.array(fc.integer({ min: 1, max: 9000 }), { minLength: 1, maxLength: 5 }),
  })
  .map((r) => ({
    epoch: r.epoch,
    place: r.place,
    steps: r.steps,
    chunk: {
      snapshotId: r.snapshotId,
      atSeq: r.atSeq,
      index: r.index,
      last: r.last,
      meta: undefined,
      pages: r.runs.map((x) => ({
        context: x.context,
        bo: x.bo,
        firstPage: x.firstPage,
        data: Uint8Array.from({ length: x.bytes }, (_, i) => (i * 7 + x.seed) % 256),
      })),
    },
  }));

/** Protobuf's reading of the same bytes: what the reader must agree with. */
function decoded(payload: Uint8Array): PrimaryMessage {
  const m = decodePrimaryMessage(fromBinary(wire.PrimaryMessageSchema, payload));
  if (m instanceof Error) throw m;
  return m;
}

/** A placer over memories of its own: the i-th run it is asked for (runs with data) placed when `place[i]`. */
function memories(place: readonly boolean[]) {
  const given: { run: number; memory: Uint8Array }[] = [];
  let run = 0;
  const placer: PagesPlacer = (_chunk, head) => {
    const i = run++;
    if (!place[i % place.length]) return undefined;
    const memory = new Uint8Array(head.bytes + 16).fill(0xee);
    given.push({ run: i, memory });
    return { into: memory.subarray(8, 8 + head.bytes), live: () => true };
  };
  return { placer, given };
}

/** Reads `bytes` (magic, accepted, one chunk frame) as a socket would, `steps` at a time. */
function readAll(bytes: Uint8Array, steps: readonly number[], placer: PagesPlacer) {
  let accepted = false;
  const reader = new FrameReader({
    accepts: { [FRAME.accepted]: 0, [FRAME.chunk]: 1 << 24 },
    payload: (kind, buf) =>
      kind === FRAME.chunk && accepted ? new PlacedChunkReader(buf, placer) : undefined,
  });
  const frames = [];
  let at = 0;
  let k = 0;
  while (at < bytes.byteLength) {
    const into = reader.target();
    expect(into.byteLength).toBeGreaterThan(0);
    const n = Math.min(into.byteLength, steps[k++ % steps.length]!, bytes.byteLength - at);
    into.set(bytes.subarray(at, at + n));
    at += n;
    const r = reader.filled(n);
    if (r instanceof FrameError) return r;
    if (r !== undefined) {
      if (r.kind === FRAME.accepted) accepted = true;
      frames.push(r);
    }
  }
  return frames;
}

/** A chunk of snapshot 9 holding one run of pages. */
function oneRun(index: number, run: SnapshotPages): SnapshotChunk {
  return { snapshotId: 9, atSeq: 100, index, last: false, meta: undefined, pages: [run] };
}

function wireOf(made: Made): { payload: Uint8Array; bytes: Uint8Array } {
  const payload = encodePulledChunk(made.epoch, made.chunk);
  const bytes = Buffer.concat([
    PAGES_MAGIC,
    frameOf(FRAME.accepted),
    frameOf(FRAME.chunk, payload),
  ]);
  return { payload, bytes };
}

describe("PlacedChunkReader", () => {
  it("makes protobuf's message, with placed runs in their memory alone", () => {
    fc.assert(
      fc.property(madeArb, (made) => {
        const { payload, bytes } = wireOf(made);
        const { placer, given } = memories(made.place);
        const frames = readAll(bytes, made.steps, placer);
        if (frames instanceof Error) throw frames;
        expect(frames.length).toBe(2);
        const got = frames[1]!.parsed as PrimaryMessage & { kind: "snapshot" };
        const want = decoded(payload) as PrimaryMessage & { kind: "snapshot" };
        expect(got.epoch).toBe(want.epoch);
        const { pages: gotPages, ...gotLead } = got.chunk;
        const { pages: wantPages, ...wantLead } = want.chunk;
        expect(gotLead).toEqual(wantLead);
        expect(gotPages.length).toBe(wantPages.length);
        const buf = frames[1]!.payload;
        let asked = -1; // the placer is asked only for runs with data
        gotPages.forEach((p, i) => {
          if (p.data.byteLength > 0) asked++;
          const w = wantPages[i]!;
          expect([p.context, p.bo, p.firstPage]).toEqual([w.context, w.bo, w.firstPage]);
          expect(Buffer.from(p.data).equals(Buffer.from(w.data))).toBe(true);
          const g = p.data.byteLength > 0 ? given.find((x) => x.run === asked) : undefined;
          if (g !== undefined) {
            expect(p.placed).toBe(true);
            expect(p.data.buffer).toBe(g.memory.buffer);
            // Nothing written around the run's bytes.
            expect([
              ...g.memory.subarray(0, 8),
              ...g.memory.subarray(8 + p.data.byteLength),
            ]).toEqual(new Array(16).fill(0xee));
          } else {
            expect(p.placed).toBeUndefined();
            expect(p.data.buffer).toBe(buf.buffer);
          }
        });
      }),
      { numRuns: 300 },
    );
  });

  it("reads a head at most HEAD_READ_BYTES at a time, and a placed run's bytes only into it", () => {
    const data = Uint8Array.from({ length: 3 * PAGE }, (_, i) => i % 253);
    const payload = encodePulledChunk(3, oneRun(2, { context: 1, bo: 2, firstPage: 5, data }));
    const buf = new Uint8Array(payload.byteLength).fill(0xaa);
    const memory = new Uint8Array(data.byteLength);
    const reader = new PlacedChunkReader(buf, () => ({ into: memory, live: () => true }));
    let at = 0;
    let result: unknown;
    while (at < payload.byteLength) {
      const into = reader.target();
      if (into.buffer === buf.buffer) expect(into.byteLength).toBeLessThanOrEqual(HEAD_READ_BYTES);
      const n = Math.min(into.byteLength, payload.byteLength - at);
      into.set(payload.subarray(at, at + n));
      at += n;
      result = reader.filled(n);
    }
    expect(result).toMatchObject({ kind: "snapshot", epoch: 3, chunk: { index: 2 } });
    expect(memory).toEqual(data);
    // The receive buffer got the head and the few bytes read past it, not the run.
    const untouched = buf.subarray(HEAD_READ_BYTES);
    expect(untouched.every((b) => b === 0xaa)).toBe(true);
    expect(reader.allPlaced).toBe(true);
  });

  it("stops before writing another byte once its placement is not live", () => {
    const data = new Uint8Array(4 * PAGE).fill(0x11);
    const payload = encodePulledChunk(1, oneRun(1, { context: 0, bo: 1, firstPage: 0, data }));
    const memory = new Uint8Array(data.byteLength);
    let live = true;
    const placement: PagesPlacement = { into: memory, live: () => live };
    const reader = new PlacedChunkReader(new Uint8Array(payload.byteLength), () => placement);
    let at = 0;
    const feed = (max: number) => {
      const into = reader.target();
      const n = Math.min(into.byteLength, max, payload.byteLength - at);
      into.set(payload.subarray(at, at + n));
      at += n;
      return reader.filled(n);
    };
    expect(feed(HEAD_READ_BYTES)).toBeUndefined(); // the head and a few bytes
    expect(feed(PAGE)).toBeUndefined();
    const written = memory.reduce((sum, b) => sum + (b === 0x11 ? 1 : 0), 0);
    live = false; // e.g. the replica was replaced, or took this chunk from elsewhere
    const r = feed(PAGE);
    expect(r).toBeInstanceOf(Error);
    expect(memory.reduce((sum, b) => sum + (b === 0x11 ? 1 : 0), 0)).toBe(written);
    expect(reader.filled(1)).toBeInstanceOf(Error); // stays broken
  });

  it("refuses a chunk with metadata, a foreign message and lengths that do not add up", () => {
    const refuse = (payload: Uint8Array) => {
      const reader = new PlacedChunkReader(new Uint8Array(payload.byteLength), () => undefined);
      let at = 0;
      while (at < payload.byteLength) {
        const into = reader.target();
        const n = Math.min(into.byteLength, payload.byteLength - at);
        into.set(payload.subarray(at, at + n));
        at += n;
        const r = reader.filled(n);
        if (r !== undefined) return r;
      }
      return undefined;
    };
    // snapshot { index: 1, meta: {} }
    expect(refuse(Uint8Array.of(0x22, 4, 0x18, 1, 0x2a, 0))).toBeInstanceOf(Error);
    // hello (field 2), not a snapshot
    expect(refuse(Uint8Array.of(0x12, 0))).toBeInstanceOf(Error);
    // the snapshot's length past the frame's end
    expect(refuse(Uint8Array.of(0x22, 9, 0x18, 1))).toBeInstanceOf(Error);
    // a pages field whose data runs past the pages field
    expect(refuse(Uint8Array.of(0x22, 8, 0x18, 1, 0x32, 4, 0x22, 5, 1, 2))).toBeInstanceOf(Error);
    // fields out of order (index before snapshot id)
    expect(refuse(Uint8Array.of(0x22, 4, 0x18, 1, 0x08, 1))).toBeInstanceOf(Error);
  });

  it("never throws on corrupted bytes", () => {
    fc.assert(
      fc.property(
        madeArb,
        fc.array(fc.tuple(fc.nat(), fc.nat({ max: 255 })), { minLength: 1, maxLength: 4 }),
        (made, flips) => {
          const payload = Uint8Array.from(encodePulledChunk(made.epoch, made.chunk));
          for (const [at, v] of flips) payload[at % payload.byteLength] = v;
          const { placer } = memories(made.place);
          const reader = new PlacedChunkReader(new Uint8Array(payload.byteLength), placer);
          let at = 0;
          let k = 0;
          while (at < payload.byteLength) {
            const into = reader.target();
            const n = Math.min(
              into.byteLength,
              made.steps[k++ % made.steps.length]!,
              payload.byteLength - at,
            );
            into.set(payload.subarray(at, at + n));
            at += n;
            const r = reader.filled(n);
            if (r instanceof Error) return;
            if (r !== undefined) {
              expect(at).toBe(payload.byteLength);
              return;
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
