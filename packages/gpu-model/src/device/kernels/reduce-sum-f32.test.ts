// Proves reduce_sum_f32 writes the in-order fround-accumulated sum from +0 into out[0], bit for
// bit (NaN canonical), touching nothing else, against a naive reference on random float32 bit
// patterns and sizes (0, 1, full capacity); and that validate rejects overruns and out == in.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { reduceSumF32Kernel } from "./reduce-sum-f32.js";
import {
  bitsDiff,
  bitsToF32,
  f32BitsArb,
  f32ToBits,
  guardsIntact,
  makeBuffer,
  PAGE_ELEMENTS,
  snapshot,
} from "./test-support.js";

function reference(inBits: Uint32Array, n: number): number {
  let sum = 0;
  for (let i = 0; i < n; i++) sum = Math.fround(sum + bitsToF32(inBits[i]!));
  return f32ToBits(sum);
}

function check(outContents: number[], inContents: number[], inPages: number, n: number) {
  const out = makeBuffer(1, 1, outContents);
  const input = makeBuffer(2, inPages, inContents);
  const outBefore = snapshot(out);
  const inBefore = snapshot(input);
  const args = [out, input, n];
  expect(reduceSumF32Kernel.validate(args)).toBeNull();
  reduceSumF32Kernel.run(args);
  outBefore[0] = reference(inBefore, n);
  expect(bitsDiff(out.u32, outBefore)).toBeNull();
  expect(bitsDiff(input.u32, inBefore)).toBeNull();
  expect(guardsIntact(out) && guardsIntact(input)).toBe(true);
}

describe("reduce_sum_f32", () => {
  it("matches the reference bit for bit on random inputs", () => {
    fc.assert(
      fc.property(
        fc.array(f32BitsArb, { maxLength: 4 }),
        fc.array(f32BitsArb, { maxLength: 200 }),
        fc.nat({ max: 220 }),
        (outContents, inContents, n) => check(outContents, inContents, 1, n),
      ),
    );
  });

  it("handles n = 0, 1, the whole buffer and signed zeros", () => {
    const values = [0x3f800000, 0x33800000, 0x33800000, 0xbf800000];
    for (const n of [0, 1, 2, 3, 4, PAGE_ELEMENTS]) check([0xdeadbeef, 9], values, 1, n);
    check([], [0x80000000, 0x80000000], 1, 2);
    check([], [0x7fc00123, 0x3f800000], 1, 2);
    check([], [0x3f800000], 2, 2 * PAGE_ELEMENTS);
  });

  it("rounds at every step", () => {
    // 1 + 2^-24 rounds back to 1 in float32 each time, so the result is 1, not 1 + 2^-23.
    const out = makeBuffer(1, 1);
    const input = makeBuffer(2, 1, [0x3f800000, 0x33800000, 0x33800000]);
    reduceSumF32Kernel.run([out, input, 3]);
    expect(out.u32[0]).toBe(0x3f800000);
  });

  it("rejects n beyond the input and out == in", () => {
    const out = makeBuffer(1, 1);
    const input = makeBuffer(2, 1);
    expect(reduceSumF32Kernel.validate([out, input, PAGE_ELEMENTS + 1])?.reason).toBe("args");
    expect(reduceSumF32Kernel.validate([input, input, 1])?.reason).toBe("args");
    expect(reduceSumF32Kernel.validate([out, input, PAGE_ELEMENTS])).toBeNull();
    expect(reduceSumF32Kernel.work([out, input, 8])).toBe(16);
  });
});
