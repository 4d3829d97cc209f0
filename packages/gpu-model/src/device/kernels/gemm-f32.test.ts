// Proves gemm_f32 equals a naive i-j-p float32 reference (fround product, fround sum from +0,
// p ascending, operands and results flushed as contract v2 says) bit for bit (NaNs canonical) on random float32 bit patterns and random,
// degenerate (0, 1×1, 1×k, k×1) and odd non-square shapes, touching nothing beyond C; that a
// may alias b; and that validate rejects overruns, huge dimensions and c aliasing a or b.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { gemmF32Kernel } from "./gemm-f32.js";
import {
  addRef,
  bitsDiff,
  bitsToF32,
  f32BitsArb,
  f32ToBits,
  guardsIntact,
  makeBuffer,
  mulRef,
  PAGE_ELEMENTS,
  pagesFor,
  snapshot,
} from "./test-support.js";

function reference(
  cBits: Uint32Array,
  aBits: Uint32Array,
  bBits: Uint32Array,
  m: number,
  n: number,
  k: number,
): Uint32Array {
  const after = cBits.slice();
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let sum = 0;
      for (let p = 0; p < k; p++) {
        sum = addRef(sum, mulRef(bitsToF32(aBits[i * k + p]!), bitsToF32(bBits[p * n + j]!)));
      }
      after[i * n + j] = f32ToBits(sum);
    }
  }
  return after;
}

interface Case {
  m: number;
  n: number;
  k: number;
  a: number[];
  b: number[];
  c: number[];
}

function check({ m, n, k, a: aBits, b: bBits, c: cBits }: Case, shareAB = false) {
  const c = makeBuffer(1, pagesFor(m * n), cBits);
  const a = makeBuffer(2, pagesFor(m * k), aBits);
  const b = shareAB ? a : makeBuffer(3, pagesFor(k * n), bBits);
  const aBefore = snapshot(a);
  const bBefore = snapshot(b);
  const expected = reference(snapshot(c), aBefore, bBefore, m, n, k);
  const args = [c, a, b, m, n, k];
  expect(gemmF32Kernel.validate(args)).toBeNull();
  gemmF32Kernel.run(args);
  expect(bitsDiff(c.u32, expected)).toBeNull();
  expect(bitsDiff(a.u32, aBefore)).toBeNull();
  expect(bitsDiff(b.u32, bBefore)).toBeNull();
  expect(guardsIntact(c) && guardsIntact(a) && guardsIntact(b)).toBe(true);
}

const caseArb = (maxDim: number): fc.Arbitrary<Case> =>
  fc
    .tuple(fc.nat({ max: maxDim }), fc.nat({ max: maxDim }), fc.nat({ max: maxDim }))
    .chain(([m, n, k]) =>
      fc.record({
        m: fc.constant(m),
        n: fc.constant(n),
        k: fc.constant(k),
        a: fc.array(f32BitsArb, { minLength: m * k, maxLength: m * k }),
        b: fc.array(f32BitsArb, { minLength: k * n, maxLength: k * n }),
        c: fc.array(f32BitsArb, { maxLength: m * n + 4 }),
      }),
    );

describe("gemm_f32", () => {
  it("matches the naive i-j-p reference bit for bit on random inputs", () => {
    fc.assert(fc.property(caseArb(9), (testCase) => check(testCase)));
  });

  it("matches the reference on larger random matrices", () => {
    fc.assert(
      fc.property(caseArb(40), (testCase) => check(testCase)),
      { numRuns: 10 },
    );
  });

  it("handles degenerate, odd and capacity-filling shapes", () => {
    const shapes = [
      [1, 1, 1],
      [1, 7, 1],
      [1, 1, 9],
      [7, 1, 1],
      [1, 5, 9],
      [9, 5, 1],
      [3, 5, 7],
      [0, 3, 3],
      [3, 0, 3],
      [3, 3, 0],
      [32, 32, 32],
    ] as const;
    fc.assert(
      fc.property(
        fc.array(f32BitsArb, { minLength: PAGE_ELEMENTS, maxLength: PAGE_ELEMENTS }),
        (bits) => {
          for (const [m, n, k] of shapes) {
            check({
              m,
              n,
              k,
              a: bits.slice(0, m * k),
              b: bits.slice(PAGE_ELEMENTS - k * n),
              c: bits.slice(7),
            });
          }
        },
      ),
      { numRuns: 5 },
    );
  });

  it("allows a and b to be the same buffer", () => {
    fc.assert(
      fc.property(fc.array(f32BitsArb, { minLength: 16, maxLength: 16 }), (bits) => {
        check({ m: 4, n: 4, k: 4, a: bits, b: [], c: [] }, true);
      }),
    );
  });

  it("rejects c aliasing a or b, overruns and huge dimensions", () => {
    const c = makeBuffer(1, 1);
    const a = makeBuffer(2, 1);
    const b = makeBuffer(3, 1);
    const u32Max = 0xffffffff;
    expect(gemmF32Kernel.validate([a, a, b, 2, 2, 2])?.reason).toBe("args");
    expect(gemmF32Kernel.validate([b, a, b, 2, 2, 2])?.reason).toBe("args");
    expect(gemmF32Kernel.validate([c, a, a, 32, 32, 32])).toBeNull();
    expect(gemmF32Kernel.validate([c, a, b, 33, 32, 32])?.reason).toBe("args");
    expect(gemmF32Kernel.validate([c, a, b, 32, 33, 32])?.reason).toBe("args");
    expect(gemmF32Kernel.validate([c, a, b, 32, 32, 33])?.reason).toBe("args");
    expect(gemmF32Kernel.validate([c, a, b, u32Max, u32Max, u32Max])?.reason).toBe("args");
    expect(gemmF32Kernel.validate([c, a, b, 1, 1, u32Max])?.reason).toBe("args");
    expect(gemmF32Kernel.validate([c, a, b, 65536, 65536, 0])?.reason).toBe("args");
    expect(gemmF32Kernel.validate([c, a, b, 0, u32Max, u32Max])?.reason).toBe("args");
  });

  it("does nothing, quickly, for an empty C with huge other dimensions", () => {
    const c = makeBuffer(1, 1, [5]);
    const a = makeBuffer(2, 1);
    const b = makeBuffer(3, 1);
    const args = [c, a, b, 0xffffffff, 0, 0];
    expect(gemmF32Kernel.validate(args)).toBeNull();
    expect(gemmF32Kernel.work(args)).toBe(0);
    gemmF32Kernel.run(args);
    expect(c.u32[0]).toBe(5);
  });

  it("reports m*n*k work, and m*n when k is 0", () => {
    const c = makeBuffer(1, 1);
    expect(gemmF32Kernel.work([c, c, c, 2, 3, 4])).toBe(24);
    expect(gemmF32Kernel.work([c, c, c, 2, 3, 0])).toBe(6);
  });
});
