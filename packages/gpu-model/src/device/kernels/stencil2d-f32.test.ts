// Proves stencil2d_f32 equals a naive 2-D reference (clamped 5-point stencil, fround after every
// operation, operands and results flushed as contract v2 says, fresh grids per iteration) bit for bit (NaNs canonical) on random float32 grids,
// shapes (1×1, 1×N, N×1, capacity-filling) and iteration counts (0 copies src's bits); that src
// and everything past width*height in dst are untouched; and that validate rejects bad shapes,
// overruns and dst == src.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { stencil2dF32Kernel } from "./stencil2d-f32.js";
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
  pagesFor,
  snapshot,
  subRef,
} from "./test-support.js";

function clamp(value: number, max: number): number {
  return Math.min(Math.max(value, 0), max);
}

function reference(
  dstBits: Uint32Array,
  srcBits: Uint32Array,
  width: number,
  height: number,
  iterations: number,
  alpha: number,
): Uint32Array {
  const after = dstBits.slice();
  if (iterations === 0) {
    for (let i = 0; i < width * height; i++) after[i] = srcBits[i]!;
    return after;
  }
  let grid: number[][] = [];
  for (let y = 0; y < height; y++) {
    grid.push([]);
    for (let x = 0; x < width; x++) grid[y]!.push(bitsToF32(srcBits[y * width + x]!));
  }
  const at = (y: number, x: number) => grid[clamp(y, height - 1)]![clamp(x, width - 1)]!;
  for (let it = 0; it < iterations; it++) {
    const next: number[][] = [];
    for (let y = 0; y < height; y++) {
      next.push([]);
      for (let x = 0; x < width; x++) {
        const c = at(y, x);
        const sum = addRef(addRef(addRef(at(y - 1, x), at(y + 1, x)), at(y, x + 1)), at(y, x - 1));
        const laplacian = subRef(sum, mulRef(4, c));
        next[y]!.push(addRef(c, mulRef(alpha, laplacian)));
      }
    }
    grid = next;
  }
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) after[y * width + x] = f32ToBits(grid[y]![x]!);
  }
  return after;
}

interface Case {
  width: number;
  height: number;
  iterations: number;
  alpha: number;
  src: number[];
  dst: number[];
}

function check({ width, height, iterations, alpha, src: srcBits, dst: dstBits }: Case) {
  const pages = pagesFor(width * height);
  const dst = makeBuffer(1, pages, dstBits);
  const src = makeBuffer(2, pages, srcBits);
  const srcBefore = snapshot(src);
  const expected = reference(snapshot(dst), srcBefore, width, height, iterations, alpha);
  const args = [dst, src, width, height, iterations, alpha];
  expect(stencil2dF32Kernel.validate(args)).toBeNull();
  stencil2dF32Kernel.run(args);
  expect(bitsDiff(dst.u32, expected)).toBeNull();
  expect(bitsDiff(src.u32, srcBefore)).toBeNull();
  expect(guardsIntact(dst) && guardsIntact(src)).toBe(true);
}

const caseArb = (maxSide: number, maxIterations: number): fc.Arbitrary<Case> =>
  fc
    .tuple(fc.integer({ min: 1, max: maxSide }), fc.integer({ min: 1, max: maxSide }))
    .chain(([width, height]) =>
      fc.record({
        width: fc.constant(width),
        height: fc.constant(height),
        iterations: fc.nat({ max: maxIterations }),
        alpha: f32ScalarArb,
        src: fc.array(f32BitsArb, { minLength: width * height, maxLength: width * height }),
        dst: fc.array(f32BitsArb, { maxLength: width * height + 4 }),
      }),
    );

describe("stencil2d_f32", () => {
  it("matches the naive reference bit for bit on random grids", () => {
    fc.assert(fc.property(caseArb(9, 5), (testCase) => check(testCase)));
  });

  it("handles 1×1, 1×N, N×1, capacity-filling grids and 0 or several iterations", () => {
    const shapes = [
      [1, 1],
      [1, 13],
      [13, 1],
      [2, 2],
      [32, 32],
      [1, PAGE_ELEMENTS],
    ] as const;
    fc.assert(
      fc.property(
        fc.array(f32BitsArb, { minLength: PAGE_ELEMENTS, maxLength: PAGE_ELEMENTS }),
        f32ScalarArb,
        (bits, alpha) => {
          for (const [width, height] of shapes) {
            for (const iterations of [0, 1, 2, 7]) {
              const src = bits.slice(0, width * height);
              check({ width, height, iterations, alpha, src, dst: bits.slice(3) });
            }
          }
        },
      ),
      { numRuns: 3 },
    );
  });

  it("copies src's exact bits, NaN payloads and subnormals included, for 0 iterations", () => {
    const src = [0x7fc00123, 0xff800001, 0x80000000, 1];
    check({ width: 2, height: 2, iterations: 0, alpha: 0.5, src, dst: [] });
    const dst = makeBuffer(1, 1);
    stencil2dF32Kernel.run([dst, makeBuffer(2, 1, src), 2, 2, 0, 0.5]);
    expect([...dst.u32.subarray(0, 4)]).toEqual(src);
  });

  it("flushes subnormal cells and a subnormal alpha, and subnormal results, keeping signs", () => {
    // One cell (clamped: all neighbours are itself, so laplacian = 4c - 4c): new = c + alpha*0.
    const one = (cellBits: number, alpha: number) => {
      const dst = makeBuffer(1, 1);
      stencil2dF32Kernel.run([dst, makeBuffer(2, 1, [cellBits]), 1, 1, 1, alpha]);
      return dst.u32[0]!;
    };
    expect(one(0x00000001, 0.5)).toBe(0x00000000); // +subnormal cell: +0
    expect(one(0x807fffff, 0.5)).toBe(0x00000000); // -0 + 0.5*(+0) = -0 + +0 = +0
    expect(one(0x00800000, 0.5)).toBe(0x00800000); // the smallest normal stays
    // Two cells c0 = 2^-126, c1 = 1.5·2^-126 (a 2×1 grid, clamped). For cell 0, n = s = w = c0
    // and e = c1: the laplacian 4.5·2^-126 - 4·2^-126 = 0.5·2^-126 is subnormal, so +0, and the
    // cell keeps its value (unflushed it would become c0 + alpha·0.5·2^-126).
    const dst = makeBuffer(1, 1);
    stencil2dF32Kernel.run([dst, makeBuffer(2, 1, [0x00800000, 0x00c00000]), 2, 1, 1, 0.25]);
    expect(dst.u32[0]).toBe(0x00800000);
    // A subnormal alpha is a zero: nothing changes.
    stencil2dF32Kernel.run([dst, makeBuffer(2, 1, [0x3f800000, 0x40000000]), 2, 1, 1, 2 ** -149]);
    expect([dst.u32[0], dst.u32[1]]).toEqual([0x3f800000, 0x40000000]);
  });

  it("rejects zero sides, overruns and dst == src", () => {
    const dst = makeBuffer(1, 1);
    const src = makeBuffer(2, 1);
    expect(stencil2dF32Kernel.validate([dst, src, 0, 4, 1, 0.5])?.reason).toBe("args");
    expect(stencil2dF32Kernel.validate([dst, src, 4, 0, 1, 0.5])?.reason).toBe("args");
    expect(stencil2dF32Kernel.validate([src, src, 4, 4, 1, 0.5])?.reason).toBe("args");
    expect(stencil2dF32Kernel.validate([dst, src, 33, 32, 1, 0.5])?.reason).toBe("args");
    expect(stencil2dF32Kernel.validate([dst, makeBuffer(3, 2), 32, 64, 1, 0.5])?.reason).toBe(
      "args",
    );
    expect(stencil2dF32Kernel.validate([dst, src, 0xffffffff, 0xffffffff, 1, 0.5])?.reason).toBe(
      "args",
    );
    expect(stencil2dF32Kernel.validate([dst, src, 32, 32, 0xffffffff, Number.NaN])).toBeNull();
  });

  it("reports 16*width*height*max(iterations, 1) work", () => {
    const dst = makeBuffer(1, 1);
    expect(stencil2dF32Kernel.work([dst, dst, 3, 4, 5, 0.5])).toBe(60 * 16);
    expect(stencil2dF32Kernel.work([dst, dst, 3, 4, 0, 0.5])).toBe(12 * 16);
  });
});
