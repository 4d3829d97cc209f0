// Proves the register-blocked gemm_f32 writes exactly the bits of the kernel it replaced (the
// plain i-p-j loop, kept below as the reference, with contract v2's flush-to-zero of every
// operand, product and sum added) on random shapes that straddle the 4×8 WebAssembly tile
// (whole tiles, leftover rows, leftover columns, both) and the 256-deep panels of B (k across
// several panels, whose sums wait in C between them), on float32 data rich in NaNs,
// infinities, signed zeros and subnormals, where any change in summation order would show.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalizeNaNs } from "./f32.js";
import { flushIsIdentity, gemmF32Kernel } from "./gemm-f32.js";
import {
  bitsDiff,
  f32BitsArb,
  flushRef,
  makeBuffer,
  pagesFor,
  snapshot,
  tinyBitsArb,
} from "./test-support.js";

/** The gemm_f32 kernel before register blocking, with v2's flushes (flushRef) added. */
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
      const aip = flushRef(af[aRow + p]!);
      let bIndex = p * n;
      for (let cIndex = cRow; cIndex < cEnd; cIndex++, bIndex++) {
        const product = flushRef(Math.fround(aip * flushRef(bf[bIndex]!)));
        cf[cIndex] = flushRef(Math.fround(cf[cIndex]! + product));
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
  { weight: 1, arbitrary: tinyBitsArb() },
);

/** Bits of float32 values of either sign with a biased exponent in [low, high]. */
const exponentBitsArb = (low: number, high: number) =>
  fc
    .tuple(fc.boolean(), fc.integer({ min: low, max: high }), fc.integer({ min: 0, max: 0x7fffff }))
    .map(([negative, e, mantissa]) => ((negative ? 0x80000000 : 0) | (e << 23) | mantissa) >>> 0);

/** Specials that are not tiny: zeros, infinities, NaNs, 1, 2^-24, the largest finite. */
const wideSpecialBitsArb = fc.constantFrom(
  0x00000000,
  0x80000000,
  0x7f800000,
  0xff800000,
  0x7fc00000,
  0x7fa00001,
  0xffc12345,
  0x3f800000,
  0x33800000,
  0x7f7fffff,
);

/** Data on which the tiles skip the flushes (no value below 2^-27 in magnitude but zeros). */
const normalBitsArb = fc.oneof(
  { weight: 4, arbitrary: exponentBitsArb(100, 140) },
  { weight: 1, arbitrary: wideSpecialBitsArb },
);

/** Values near 2^-51, whose products lie around the tiles' bound of 2^-102 and whose sums
 * can cancel toward the subnormal range: both paths run, on either side of the bound. */
const thresholdBitsArb = fc.oneof(
  { weight: 4, arbitrary: exponentBitsArb(75, 77) },
  { weight: 1, arbitrary: wideSpecialBitsArb },
);

interface Case {
  m: number;
  n: number;
  k: number;
  a: number[];
  b: number[];
}

/** A case of the given shapes, with A and B filled from `values` (bitsArb by default). */
const caseOf = (
  shapes: fc.Arbitrary<[number, number, number]>,
  values: fc.Arbitrary<number> = bitsArb,
): fc.Arbitrary<Case> =>
  shapes.chain(([m, n, k]) =>
    fc.record({
      m: fc.constant(m),
      n: fc.constant(n),
      k: fc.constant(k),
      a: fc.array(values, { minLength: m * k, maxLength: m * k }),
      b: fc.array(values, { minLength: k * n, maxLength: k * n }),
    }),
  );

const caseArb = (maxDim: number, values?: fc.Arbitrary<number>): fc.Arbitrary<Case> =>
  caseOf(
    fc.tuple(
      fc.integer({ min: 1, max: maxDim }),
      fc.integer({ min: 1, max: maxDim }),
      fc.nat({ max: maxDim }),
    ),
    values,
  );

/** Whether the kernel's tiles may skip the flushes on this case (else they flush each step). */
function tiled({ m, n, k, a, b }: Case): boolean {
  const af = makeBuffer(2, pagesFor(m * k), a).f32;
  const bf = makeBuffer(3, pagesFor(k * n), b).f32;
  return flushIsIdentity(af, bf, m, n, k);
}

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

  it("writes the previous kernel's bits on data without tiny values (tiles without flushes)", () => {
    const property = fc.property(caseArb(37, normalBitsArb), (testCase) => {
      expect(tiled(testCase)).toBe(true);
      check(testCase);
    });
    fc.assert(property, { numRuns: 60 });
  });

  it("writes the previous kernel's bits on both sides of the tiles' bound on tiny products", () => {
    const paths = { tiled: 0, flushed: 0 };
    const property = fc.property(caseArb(12, thresholdBitsArb), (testCase) => {
      paths[tiled(testCase) ? "tiled" : "flushed"]++;
      check(testCase);
    });
    fc.assert(property, { numRuns: 200 });
    expect(paths.tiled).toBeGreaterThan(10);
    expect(paths.flushed).toBeGreaterThan(10);
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
