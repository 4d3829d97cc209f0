// Proves the accounting of incomplete guest messages: MessageFramer holds exactly what
// grpc-js's own StreamDecoder holds for any message sequence cut into any chunks, and a stream
// is charged exactly the buffers that decoder's slices keep alive (a 1-byte slice of a 64 KiB
// read buffer costs 64 KiB; a whole message's pieces until the next message begins); the budgets
// (before Open per stream, per source, node-wide) hold after every chunk, the streams reset are
// the largest of the source past its budget (or of the hungriest source), nothing is reset
// while every budget holds, and the totals always equal what the live streams hold.
import { createRequire } from "node:module";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type IncompleteMessageLimits,
  IncompleteMessages,
  MessageFramer,
  type TrackedStream,
} from "./incomplete-messages.js";

// grpc-js's decoder is not in its public API: reached by path, for this comparison only.
const require = createRequire(import.meta.url);
const { StreamDecoder } = require("@grpc/grpc-js/build/src/stream-decoder.js") as {
  StreamDecoder: new (
    max: number,
  ) => {
    write(b: Buffer): Buffer[];
    readPartialMessage: Buffer[];
    readCompressFlag: Buffer;
    readState: number;
    readSizeRemaining: number;
  };
};

const message = (length: number): Buffer => {
  const b = Buffer.alloc(5 + length, 7);
  b[0] = 0;
  b.writeUInt32BE(length, 1);
  return b;
};

/** Cuts `bytes` at the given fractions of its length, and at the given offsets. */
function cut(bytes: Buffer, at: number[], offsets: number[] = []): Buffer[] {
  const points = [...new Set([...at.map((f) => Math.floor(f * bytes.length)), ...offsets])].sort(
    (a, b) => a - b,
  );
  const out: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    if (p > from) out.push(own(bytes.subarray(from, p)));
    from = Math.max(from, p);
  }
  if (from < bytes.length) out.push(own(bytes.subarray(from)));
  return out;
}

/** A copy in a buffer of its own, exactly its size (a chunk of one socket read). */
const own = (b: Uint8Array): Buffer => {
  const copy = new Uint8Array(b.length);
  copy.set(b);
  return Buffer.from(copy.buffer);
};

const UNBOUNDED: IncompleteMessageLimits = {
  maxIncompleteBytesBeforeOpen: Number.MAX_SAFE_INTEGER,
  maxIncompleteBytesPerSource: Number.MAX_SAFE_INTEGER,
  maxIncompleteBytesTotal: Number.MAX_SAFE_INTEGER,
};

describe("MessageFramer", () => {
  it("holds what grpc-js's StreamDecoder holds, chunk after chunk", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 3000 }), { maxLength: 6 }),
        fc.integer({ min: 0, max: 4000 }),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 12 }),
        fc.boolean(),
        (lengths, tail, at, aligned) => {
          // Whole messages, then one that is begun and not finished.
          const partial = message(tail + 1).subarray(0, 5 + tail);
          const bytes = Buffer.concat([...lengths.map(message), partial]);
          // Aligned: chunks that also end where messages end (one completes at a chunk's end).
          const ends: number[] = [];
          let end = 0;
          for (const l of aligned ? lengths : []) {
            end += 5 + l;
            ends.push(end);
          }
          const framer = new MessageFramer();
          const decoder = new StreamDecoder(-1);
          const m = new IncompleteMessages(UNBOUNDED);
          const tracked = m.add("10.0.0.1");
          let whole = 0;
          let flagRead = false; // before the first flag byte, the decoder's flag is its own
          for (const chunk of cut(bytes, at, ends)) {
            whole += decoder.write(chunk).length;
            flagRead ||= chunk.length > 0;
            framer.write(chunk);
            m.data(tracked, chunk);
            // What grpc-js's slices keep alive: the buffers of its latest message's body pieces
            // and flag byte (whole or not: it lets go of them when the next message begins).
            const alive = new Set(decoder.readPartialMessage.map((b) => b.buffer));
            if (flagRead) alive.add(decoder.readCompressFlag.buffer);
            expect(tracked.pinned).toEqual(alive);
            const aliveBytes = [...tracked.pinned].reduce((n, b) => n + b.byteLength, 0);
            expect(tracked.pinnedBytes).toBe(aliveBytes);
            expect(m.totalBytes).toBe(aliveBytes);
            const body = decoder.readPartialMessage.reduce((n, b) => n + b.length, 0);
            // readState 0: between messages; 1: reading the prefix; 2: reading the body.
            const prefix =
              decoder.readState === 0
                ? 0
                : decoder.readState === 1
                  ? 5 - decoder.readSizeRemaining
                  : 5;
            expect(framer.heldBytes).toBe(decoder.readState === 0 ? 0 : prefix + body);
            expect(framer.messages).toBe(whole);
          }
          expect(framer.messages).toBe(lengths.length);
          expect(framer.heldBytes).toBe(5 + tail);
        },
      ),
    );
  });
});

const LIMITS: IncompleteMessageLimits = {
  maxIncompleteBytesBeforeOpen: 100,
  maxIncompleteBytesPerSource: 1000,
  maxIncompleteBytesTotal: 1500,
};

const OPEN = message(20); // a small whole first message

/** Each buffer once. */
const bytesOf = (sets: Iterable<Set<ArrayBufferLike>>): number => {
  const all = new Set<ArrayBufferLike>();
  for (const set of sets) for (const b of set) all.add(b);
  return [...all].reduce((n, b) => n + b.byteLength, 0);
};

describe("IncompleteMessages", () => {
  it("resets a stream past its allowance before its first message is whole", () => {
    const m = new IncompleteMessages(LIMITS);
    const s = m.add("10.0.0.1");
    expect(m.data(s, own(message(500).subarray(0, 100)))).toEqual([]);
    const reset = m.data(s, Buffer.alloc(1));
    expect(reset).toEqual([{ stream: s, overflow: "before_open", heldBytes: 101 }]);
    expect(m.totalBytes).toBe(0);
    expect(m.data(s, Buffer.alloc(10))).toEqual([]); // gone: no longer counted
  });

  it("lets an opened stream hold up to its source's budget, then resets the source's largest", () => {
    const m = new IncompleteMessages(LIMITS);
    const a = m.add("10.0.0.1");
    const b = m.add("10.0.0.1");
    m.data(a, OPEN);
    m.data(b, OPEN);
    expect(m.data(a, own(message(2000).subarray(0, 600)))).toEqual([]);
    expect(m.data(b, own(message(2000).subarray(0, 300)))).toEqual([]);
    expect(m.bytesOf("10.0.0.1")).toBe(900);
    expect(m.data(b, Buffer.alloc(100))).toEqual([]); // 1000: at the budget
    const reset = m.data(b, Buffer.alloc(1)); // 1001 > 1000: a (600) goes, not b (401)
    expect(reset.map((r) => [r.stream, r.overflow, r.heldBytes])).toEqual([[a, "source", 600]]);
    expect(m.bytesOf("10.0.0.1")).toBe(401);
  });

  it("past the node's budget resets the largest stream of the hungriest source", () => {
    const m = new IncompleteMessages(LIMITS);
    const big = [m.add("10.0.0.1"), m.add("10.0.0.1")];
    const other = m.add("10.0.0.2");
    for (const s of [...big, other]) m.data(s, OPEN);
    m.data(big[0]!, own(message(5000).subarray(0, 450)));
    m.data(big[1]!, own(message(5000).subarray(0, 450)));
    m.data(other, own(message(5000).subarray(0, 590)));
    expect(m.data(other, Buffer.alloc(10))).toEqual([]); // 1500: at the budget, not past it
    const reset = m.data(other, Buffer.alloc(1)); // 1501 > 1500
    expect(reset.map((r) => [r.stream, r.overflow])).toEqual([[big[0], "node"]]);
    expect(m.totalBytes).toBe(1051);
  });

  it("charges the whole buffer a held slice keeps alive, once per stream and per source", () => {
    const m = new IncompleteMessages({ ...UNBOUNDED, maxIncompleteBytesBeforeOpen: 100_000 });
    const s = m.add("10.0.0.1");
    const read = new Uint8Array(65_536); // one socket read
    read.set([0, 0, 1, 0, 0], 0); // a prefix announcing 65536 bytes
    expect(m.data(s, read.subarray(0, 6))).toEqual([]); // 6 bytes held
    expect(s.pinnedBytes).toBe(65_536);
    m.data(s, read.subarray(100, 101)); // another slice of the same read: no more
    expect(s.pinnedBytes).toBe(65_536);
    // Another stream of the connection with a slice of the same read: the source pays once.
    const t = m.add("10.0.0.1");
    read.set([0, 0, 1, 0, 0], 200);
    m.data(t, read.subarray(200, 300));
    expect([t.pinnedBytes, m.bytesOf("10.0.0.1"), m.totalBytes]).toEqual([65_536, 65_536, 65_536]);
    m.remove(t);
    expect(m.totalBytes).toBe(65_536); // s still pins it
    const reset = m.data(s, new Uint8Array(65_536).subarray(0, 1)); // 1 byte of another read
    expect(s.pinnedBytes).toBe(0);
    expect(reset).toEqual([{ stream: s, overflow: "before_open", heldBytes: 131_072 }]);
    expect(m.totalBytes).toBe(0);
  });

  it("keeps a frozen stream's buffers charged until it is removed", () => {
    const m = new IncompleteMessages(LIMITS);
    const s = m.add("10.0.0.1");
    m.data(s, OPEN);
    m.data(s, own(message(800).subarray(0, 400)));
    m.freeze(s);
    expect(m.data(s, Buffer.alloc(400))).toEqual([]); // grpc-js no longer reads it
    expect(m.totalBytes).toBe(400);
    m.remove(s);
    m.remove(s); // idempotent
    expect(m.totalBytes).toBe(0);
    expect(m.bytesOf("10.0.0.1")).toBe(0);
  });

  it("holds every budget after every chunk, resets only past one, and counts exactly", () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant("add" as const), source: fc.integer({ min: 0, max: 3 }) }),
      fc.record({
        kind: fc.constant("data" as const),
        stream: fc.nat(),
        bytes: fc.uint8Array({ maxLength: 400 }),
        open: fc.boolean(),
        sameRead: fc.boolean(),
      }),
      fc.record({ kind: fc.constant("remove" as const), stream: fc.nat() }),
      fc.record({ kind: fc.constant("freeze" as const), stream: fc.nat() }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80 }), (ops) => {
        const m = new IncompleteMessages(LIMITS);
        const streams: TrackedStream[] = [];
        const shadows = new Map<TrackedStream, MessageFramer>();
        const model = new Map<TrackedStream, Set<ArrayBufferLike>>();
        const live = () => streams.filter((t) => !t.gone);
        const reads = new Map<string, { buffer: Uint8Array; at: number }>();
        for (const o of ops) {
          if (o.kind === "add") {
            const t = m.add(`10.0.0.${o.source}`);
            streams.push(t);
            shadows.set(t, new MessageFramer());
            model.set(t, new Set());
            continue;
          }
          const s = streams.length > 0 ? streams[o.stream % streams.length]! : undefined;
          if (s === undefined) continue;
          if (o.kind === "remove") m.remove(s);
          else if (o.kind === "freeze") m.freeze(s);
          else {
            // Small prefixes (lengths up to 1023) so that messages complete too; each chunk
            // in a buffer of its own, as one socket read.
            const bytes = o.open
              ? Buffer.concat([OPEN, Buffer.from([0, 0, 0, o.bytes.length > 0 ? 3 : 0, 255])])
              : o.bytes;
            // Sometimes in the same read (buffer) as the source's previous chunk.
            const read = reads.get(s.source);
            let chunk: Uint8Array;
            if (o.sameRead && read !== undefined && read.at + bytes.length <= read.buffer.length) {
              read.buffer.set(bytes, read.at);
              chunk = read.buffer.subarray(read.at, read.at + bytes.length);
              read.at += bytes.length;
            } else {
              const fresh = new Uint8Array(Math.max(bytes.length, 600));
              fresh.set(bytes);
              chunk = fresh.subarray(0, bytes.length);
              reads.set(s.source, { buffer: fresh, at: bytes.length });
            }
            const counted = !s.gone && !s.frozen;
            // The model: each stream pins the buffers of the chunks its decoder has sliced
            // since its message began; a source and the node pay each buffer once.
            const shadow = shadows.get(s)!;
            const after = new Map([...live()].map((t) => [t, new Set(model.get(t))]));
            if (counted) {
              shadow.write(chunk);
              if (shadow.startedInLastChunk) after.get(s)!.clear();
              if (shadow.slicedLastChunk) after.get(s)!.add(chunk.buffer);
              model.set(s, new Set(after.get(s)));
            }
            const over =
              (counted &&
                shadow.messages === 0 &&
                bytesOf([after.get(s)!]) > LIMITS.maxIncompleteBytesBeforeOpen) ||
              bytesOf([...after].filter(([t]) => t.source === s.source).map(([, b]) => b)) >
                LIMITS.maxIncompleteBytesPerSource ||
              bytesOf([...after.values()]) > LIMITS.maxIncompleteBytesTotal;
            const reset = m.data(s, chunk);
            expect(reset.length > 0).toBe(over); // reset exactly when a budget was passed
            for (const r of reset) {
              expect(r.stream.gone).toBe(true);
              // Reset in decreasing order: nothing left of its source pins more.
              for (const t of live()) {
                if (t.source === r.stream.source && r.overflow !== "before_open") {
                  expect(t.pinnedBytes).toBeLessThanOrEqual(r.heldBytes);
                }
              }
            }
          }
          for (const t of streams) if (t.gone) model.set(t, new Set());
          for (const t of live()) {
            expect(t.pinned).toEqual(model.get(t));
            expect(t.pinnedBytes).toBe(bytesOf([model.get(t)!]));
            if (t.framer.messages === 0) {
              expect(t.pinnedBytes).toBeLessThanOrEqual(LIMITS.maxIncompleteBytesBeforeOpen);
            }
          }
          expect(m.totalBytes).toBe(bytesOf(live().map((t) => model.get(t)!)));
          expect(m.totalBytes).toBeLessThanOrEqual(LIMITS.maxIncompleteBytesTotal);
          for (const src of new Set(live().map((t) => t.source))) {
            const held = bytesOf(
              live()
                .filter((t) => t.source === src)
                .map((t) => model.get(t)!),
            );
            expect(m.bytesOf(src)).toBe(held);
            expect(held).toBeLessThanOrEqual(LIMITS.maxIncompleteBytesPerSource);
          }
        }
      }),
    );
  });
});
