// Proves saxpy_f32 writes fround(fround(a*x[i]) + y[i]) into y[0, n), flushed as contract v2
// says (operands and results: subnormal → zero of its sign), bit for bit (NaNs canonical) and
// nothing else, against a naive reference on random float32 bit patterns,
// scalars and sizes, with y and x distinct or the same buffer; and that validate rejects overruns.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { saxpyF32Kernel } from "./saxpy-f32.js";
import {
  addRef,
  bitsDiff,
  bitsToF32,
  f32BitsArb,
  f32ScalarArb,
  f32ToBits,
  guardsIntact,
  makeBuffer,
  mulRef,
  PAGE_ELEMENTS,
  snapshot,
} from "./test-support.js";

function reference(yBits: Uint32Array, xBits: Uint32Array, n: number, a: number): Uint32Array {
  const after = yBits.slice();
  for (let i = 0; i < n; i++) {
    const x = bitsToF32(xBits[i]!);
    const y = bitsToF32(yBits[i]!);
    after[i] = f32ToBits(addRef(mulRef(a, x), y));
  }
  return after;
}

function check(yContents: number[], xContents: number[], n: number, a: number, alias: boolean) {
  const y = makeBuffer(1, 1, yContents);
  const x = alias ? y : makeBuffer(2, 1, xContents);
  const xBefore = snapshot(x);
  const expected = reference(snapshot(y), xBefore, n, a);
  const args = [y, x, n, a];
  expect(saxpyF32Kernel.validate(args)).toBeNull();
  saxpyF32Kernel.run(args);
  expect(bitsDiff(y.u32, expected)).toBeNull();
  if (!alias) expect(bitsDiff(x.u32, xBefore)).toBeNull();
  expect(guardsIntact(y) && guardsIntact(x)).toBe(true);
}

describe("saxpy_f32", () => {
  it("matches the reference bit for bit on random inputs", () => {
    const bits = fc.array(f32BitsArb, { maxLength: 64 });
    fc.assert(
      fc.property(
        bits,
        bits,
        fc.nat({ max: 72 }),
        f32ScalarArb,
        fc.boolean(),
        (yContents, xContents, n, a, alias) => check(yContents, xContents, n, a, alias),
      ),
    );
  });

  it("handles n = 0, 1, the whole buffer and special values", () => {
    const specials = [
      0x7fc00001, 0xffbfffff, 0x80000000, 0x7f800000, 0xff800000, 1, 0x3f800000, 0x807fffff,
      0x00800000, 0x80800001, 0x1f800000, 0x9f000000,
    ];
    for (const n of [0, 1, specials.length, PAGE_ELEMENTS]) {
      for (const a of [0, -0, Number.NaN, Infinity, Math.fround(0.1), 2 ** -149, -(2 ** -130)]) {
        check(specials, specials.slice().reverse(), n, a, false);
        check(specials, [], n, a, true);
      }
    }
  });

  it("flushes subnormal operands and results to zeros of their sign (contract v2)", () => {
    // [a, x bits, y bits, expected y bits]; each line differs from the unflushed result.
    const table: [number, number, number, number][] = [
      [1, 0x80000001, 0x00000000, 0x00000000], // x = -subnormal is -0: -0 + +0 = +0
      [2 ** -64, 0x1f800000, 0x80000000, 0x00000000], // 2^-128 product is +0: +0 + -0 = +0
      [-(2 ** -64), 0x1f800000, 0x80000000, 0x80000000], // -2^-128 is -0: -0 + -0 = -0
      [1, 0x00800000, 0x80c00000, 0x80000000], // 2^-126 - 1.5·2^-126 = -0.5·2^-126: -0
      [1, 0x3f800000, 0x00400000, 0x3f800000], // y subnormal: 1 + 0 = 1
      [2 ** -149, 0x7f7fffff, 0x00000000, 0x00000000], // a subnormal: 0·max = 0
    ];
    for (const [a, xBits, yBits, expected] of table) {
      const y = makeBuffer(1, 1, [yBits]);
      saxpyF32Kernel.run([y, makeBuffer(2, 1, [xBits]), 1, Math.fround(a)]);
      expect(y.u32[0]).toBe(expected);
    }
  });

  it("rejects n beyond either buffer", () => {
    const small = makeBuffer(1, 1);
    const large = makeBuffer(2, 2);
    expect(saxpyF32Kernel.validate([small, large, PAGE_ELEMENTS + 1, 1])?.reason).toBe("args");
    expect(saxpyF32Kernel.validate([large, small, PAGE_ELEMENTS + 1, 1])?.reason).toBe("args");
    expect(saxpyF32Kernel.work([large, small, 3, 1])).toBe(15);
  });
});
