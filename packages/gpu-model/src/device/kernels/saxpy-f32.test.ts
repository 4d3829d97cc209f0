// Proves saxpy_f32 writes fround(fround(a*x[i]) + y[i]) into y[0, n), bit for bit (NaNs
// canonical) and nothing else, against a naive reference on random float32 bit patterns,
// scalars and sizes, with y and x distinct or the same buffer; and that validate rejects overruns.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { saxpyF32Kernel } from "./saxpy-f32.js";
import {
  bitsDiff,
  bitsToF32,
  f32BitsArb,
  f32ScalarArb,
  f32ToBits,
  guardsIntact,
  makeBuffer,
  PAGE_ELEMENTS,
  snapshot,
} from "./test-support.js";

function reference(yBits: Uint32Array, xBits: Uint32Array, n: number, a: number): Uint32Array {
  const after = yBits.slice();
  for (let i = 0; i < n; i++) {
    const x = bitsToF32(xBits[i]!);
    const y = bitsToF32(yBits[i]!);
    after[i] = f32ToBits(Math.fround(Math.fround(a * x) + y));
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
    const specials = [0x7fc00001, 0xffbfffff, 0x80000000, 0x7f800000, 0xff800000, 1, 0x3f800000];
    for (const n of [0, 1, specials.length, PAGE_ELEMENTS]) {
      for (const a of [0, -0, Number.NaN, Infinity, Math.fround(0.1)]) {
        check(specials, specials.slice().reverse(), n, a, false);
        check(specials, [], n, a, true);
      }
    }
  });

  it("rejects n beyond either buffer", () => {
    const small = makeBuffer(1, 1);
    const large = makeBuffer(2, 2);
    expect(saxpyF32Kernel.validate([small, large, PAGE_ELEMENTS + 1, 1])?.reason).toBe("args");
    expect(saxpyF32Kernel.validate([large, small, PAGE_ELEMENTS + 1, 1])?.reason).toBe("args");
    expect(saxpyF32Kernel.work([large, small, 3, 1])).toBe(6);
  });
});
