// Proves histogram_u32 clears hist[0, bins) and counts in[i] % bins for i < n, touching nothing
// else, against a naive reference on random inputs, bin counts (1, capacity) and sizes (0, 1,
// full capacity); and that validate rejects bins = 0, overruns and hist == in.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { histogramU32Kernel } from "./histogram-u32.js";
import {
  bitsDiff,
  guardsIntact,
  makeBuffer,
  PAGE_ELEMENTS,
  snapshot,
  u32Arb,
} from "./test-support.js";

function reference(histBits: Uint32Array, inBits: Uint32Array, n: number, bins: number) {
  const after = histBits.slice();
  for (let b = 0; b < bins; b++) after[b] = 0;
  for (let i = 0; i < n; i++) {
    const bin = inBits[i]! % bins;
    after[bin] = after[bin]! + 1;
  }
  return after;
}

function check(histContents: number[], inContents: number[], n: number, bins: number) {
  const hist = makeBuffer(1, 1, histContents);
  const input = makeBuffer(2, 1, inContents);
  const inBefore = snapshot(input);
  const expected = reference(snapshot(hist), inBefore, n, bins);
  const args = [hist, input, n, bins];
  expect(histogramU32Kernel.validate(args)).toBeNull();
  histogramU32Kernel.run(args);
  expect(bitsDiff(hist.u32, expected)).toBeNull();
  expect(bitsDiff(input.u32, inBefore)).toBeNull();
  expect(guardsIntact(hist) && guardsIntact(input)).toBe(true);
}

describe("histogram_u32", () => {
  it("matches the reference on random inputs", () => {
    fc.assert(
      fc.property(
        fc.array(u32Arb, { maxLength: 40 }),
        fc.array(fc.oneof(u32Arb, fc.nat({ max: 20 })), { maxLength: 80 }),
        fc.nat({ max: 90 }),
        fc.integer({ min: 1, max: PAGE_ELEMENTS }),
        (histContents, inContents, n, bins) =>
          check(histContents, inContents, n, bins % 37 || bins),
      ),
    );
  });

  it("handles n = 0, 1, the whole buffer, one bin and every bin", () => {
    const values = [0, 1, 2, 1023, 1024, 0xffffffff, 7];
    for (const n of [0, 1, values.length, PAGE_ELEMENTS]) {
      for (const bins of [1, 2, 7, PAGE_ELEMENTS]) check([9, 9, 9], values, n, bins);
    }
  });

  it("rejects bins = 0, overruns and hist == in", () => {
    const hist = makeBuffer(1, 1);
    const input = makeBuffer(2, 1);
    expect(histogramU32Kernel.validate([hist, input, 1, 0])?.reason).toBe("args");
    expect(histogramU32Kernel.validate([hist, input, 1, PAGE_ELEMENTS + 1])?.reason).toBe("args");
    expect(histogramU32Kernel.validate([hist, input, PAGE_ELEMENTS + 1, 1])?.reason).toBe("args");
    expect(histogramU32Kernel.validate([input, input, 1, 1])?.reason).toBe("args");
    expect(histogramU32Kernel.validate([hist, input, PAGE_ELEMENTS, PAGE_ELEMENTS])).toBeNull();
    expect(histogramU32Kernel.work([hist, input, 10, 4])).toBe(10 * 32 + 4);
  });
});
