// Proves the register-blocked gemm_f32 writes exactly the bits of the kernel it replaced (the
// plain i-p-j loop, kept below as the reference) on random shapes that straddle the 4×4 tile
// (whole tiles, leftover rows, leftover columns, both) and the 256-deep panels of B (k across
// several panels, whose sums wait in C between them), on float32 data rich in NaNs,
// infinities, signed zeros and subnormals, where any change in summation order would show.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalizeNaNs } from "./f32.js";
import { gemmF32Kernel } from "./gemm-f32.js";
import { bitsDiff, f32BitsArb, makeBuffer, pagesFor, snapshot } from "./test-support.js";

/** The gemm_f32 kernel before register blocking, verbatim. */
function previousKernel(
  cf: Float32Array,
  af: Float32Array,
  bf: Float32Array,
  m: number,
  n: number,
  k: number,
) {
  for (let i = 0; i < m; i++) {
    const cRow = i * n;
    const cEnd = cRow + n;
    cf.fill(0, cRow, cEnd);
    const aRow = i * k;
    for (let p = 0; p < k; p++) {
      const aip = af[aRow + p]!;
      let bIndex = p * n;
      for (let cIndex = cRow; cIndex < cEnd; cIndex++, bIndex++) {
        cf[cIndex] = Math.fround(cf[cIndex]! + Math.fround(aip * bf[bIndex]!));
      }
    }
  }
}

/** Bits that stress summation order: specials and subnormals, beside ordinary values. */
const specialBitsArb = fc.constantFrom(
  0x00000000, // +0
  0x80000000, // -0
  0x7f800000, // +inf
  0xff800000, // -inf
  0x7fc00000, // quiet NaN
  0x7fa00001, // signalling NaN with a payload
  0xffc12345, // negative NaN with a payload
  0x00000001, // smallest subnormal
  0x807fffff, // largest negative subnormal
  0x00800000, // smallest normal
  0x7f7fffff, // largest finite
  0xff7fffff, // most negative finite
  0x3f800000, // 1
  0x33800000, // 2^-24: vanishes beside 1 unless added in the right order
);
const bitsArb = fc.oneof(
  { weight: 3, arbitrary: f32BitsArb },
  { weight: 1, arbitrary: specialBitsArb },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0x007fffff }) }, // subnormals
);

interface Case {
  m: number;
  n: number;
  k: number;
  a: number[];
  b: number[];
}

/** A case of the given shapes, with A and B filled from bitsArb. */
const caseOf = (shapes: fc.Arbitrary<[number, number, number]>): fc.Arbitrary<Case> =>
  shapes.chain(([m, n, k]) =>
    fc.record({
      m: fc.constant(m),
      n: fc.constant(n),
      k: fc.constant(k),
      a: fc.array(bitsArb, { minLength: m * k, maxLength: m * k }),
      b: fc.array(bitsArb, { minLength: k * n, maxLength: k * n }),
    }),
  );

const caseArb = (maxDim: number): fc.Arbitrary<Case> =>
  caseOf(
    fc.tuple(
      fc.integer({ min: 1, max: maxDim }),
      fc.integer({ min: 1, max: maxDim }),
      fc.nat({ max: maxDim }),
    ),
  );

function check({ m, n, k, a: aBits, b: bBits }: Case) {
  const a = makeBuffer(2, pagesFor(m * k), aBits);
  const b = makeBuffer(3, pagesFor(k * n), bBits);
  const c = makeBuffer(1, pagesFor(m * n), new Array(m * n).fill(0x12345678));
  const expected = makeBuffer(4, pagesFor(m * n), new Array(m * n).fill(0x12345678));
  previousKernel(expected.f32, a.f32, b.f32, m, n, k);
  canonicalizeNaNs(expected.f32, expected.u32, 0, m * n);
  gemmF32Kernel.run([c, a, b, m, n, k]);
  expect(bitsDiff(c.u32, snapshot(expected))).toBeNull();
}

describe("gemm_f32 register blocking", () => {
  it("writes the previous kernel's bits on small shapes around the tile size", () => {
    fc.assert(fc.property(caseArb(9), check), { numRuns: 300 });
  });

  it("writes the previous kernel's bits on larger shapes", () => {
    fc.assert(fc.property(caseArb(37), check), { numRuns: 25 });
  });

  it("writes the previous kernel's bits when k spans several panels of B (256 values of p)", () => {
    const caseOfK = caseOf(
      fc.tuple(
        fc.integer({ min: 4, max: 9 }),
        fc.integer({ min: 4, max: 9 }),
        fc.constantFrom(255, 256, 257, 512, 700),
      ),
    );
    fc.assert(fc.property(caseOfK, check), { numRuns: 15 });
  });

  it("writes the previous kernel's bits where one addition order would lose a small term", () => {
    // Row i of A is [1, 2^-24, 2^-24, ...]: 1 + 2^-24 rounds back to 1 at every step in p
    // order, whereas summing the small terms first would not. Any reordering changes C.
    const m = 6;
    const n = 7;
    const k = 33;
    const a = Array.from({ length: m * k }, (_, i) => (i % k === 0 ? 0x3f800000 : 0x33800000));
    const b = new Array(k * n).fill(0x3f800000);
    check({ m, n, k, a, b });
    const c = makeBuffer(1, 1);
    gemmF32Kernel.run([c, makeBuffer(2, 1, a), makeBuffer(3, 1, b), m, n, k]);
    expect(c.f32[0]).toBe(1);
  });
});
