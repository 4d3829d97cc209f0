// Proves the byte planning behind DMA writes and MMIO stores on a GPU: a write split into an
// aligned word copy plus patch records, and a store batch merged into one record per word,
// change a buffer exactly as the model's byte-wise writes do (random offsets, lengths, widths).
import { DeviceCore } from "@vgpu-ha/gpu-model";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { applyRecords, planWrite, storeRecords, WordPatches, xorRecord } from "./bytes.js";

const SIZE = 64;

function wordsOf(bytes: Uint8Array): Uint32Array {
  return new Uint32Array(bytes.slice().buffer);
}

describe("planWrite", () => {
  it("copies whole words at word offsets and patches only the partial words", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: SIZE, maxLength: SIZE }),
        fc.integer({ min: 0, max: SIZE }),
        fc.uint8Array({ maxLength: SIZE }),
        (initial, at, raw) => {
          const offset = Math.min(at, SIZE - raw.length);
          const data = raw;
          const plan = planWrite(offset, data.length);
          expect(plan.start % 4).toBe(0);
          expect(plan.end % 4).toBe(0);
          const words = wordsOf(initial);
          const bytes = new Uint8Array(words.buffer);
          bytes.set(data.subarray(plan.start - offset, plan.end - offset), plan.start);
          const patches = new WordPatches();
          for (const [from, to] of plan.edges) {
            expect(Math.floor(from / 4)).toBe(Math.floor((to - 1) / 4));
            patches.setBytes(from, data, from - offset, to - from);
          }
          applyRecords(words, patches.records());
          const want = initial.slice();
          want.set(data, offset);
          expect(bytes).toEqual(want);
        },
      ),
    );
  });
});

describe("storeRecords", () => {
  it("applies a store batch as the model does, later stores winning", () => {
    const store = fc.constantFrom(1, 2, 4, 8).chain((width) =>
      fc.record({
        offset: fc.integer({ min: 0, max: SIZE - width }),
        bytes: fc.uint8Array({ minLength: width, maxLength: width }),
      }),
    );
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: SIZE, maxLength: SIZE }),
        fc.array(store),
        (initial, stores) => {
          const offsets = stores.map((s) => s.offset);
          const widths = Uint8Array.from(stores.map((s) => s.bytes.length));
          const data = Uint8Array.from(stores.flatMap((s) => [...s.bytes]));
          const core = new DeviceCore();
          core.execute({ k: "alloc", id: 1, size: SIZE });
          core.execute({ k: "write", id: 1, offset: 0, data: initial });
          core.execute({ k: "stores", id: 1, offsets, widths, data });
          const want = core.execute({ k: "read", id: 1, offset: 0, length: SIZE }) as Uint8Array;
          const records = storeRecords(offsets, widths, data);
          expect(new Set(records.map((r) => r.word)).size).toBe(records.length);
          const words = wordsOf(initial);
          applyRecords(words, records);
          expect(new Uint8Array(words.buffer)).toEqual(want);
        },
      ),
    );
  });
});

describe("xorRecord", () => {
  it("flips the mask's bits in one byte and nothing else", () => {
    const words = new Uint32Array([0x11223344, 0x55667788]);
    applyRecords(words, [xorRecord(6, 0xff)]);
    expect([...words]).toEqual([0x11223344, 0x55997788]);
  });
});
