// gemm_f32(c, a, b, m, n, k): C(m×n) = A(m×k)·B(k×n), row-major float32. Each c[i][j] is
// fround-accumulated from +0 over p ascending, exactly as the naive i-j-p loop. c may not alias
// a or b (that would read partial sums); a may alias b.
//
// Register blocking: C is computed in 4×4 tiles whose sixteen running sums stay in locals
// while p runs, so each loaded element of A serves four products and each of B four more (the
// plain i-p-j loop loaded and stored C once per product). The four columns of B a tile needs
// are first copied, PANEL_DEPTH values of p at a time, into a small contiguous panel that
// every tile of those columns reads. Between two panels a tile's sums wait in C: they are
// already fround-ed, so storing them in the f32 view and loading them back loses nothing.
// Every sum still sees its products in p order, rounding through Math.fround at each step, so
// the result is bit for bit that of the naive loop. Columns past the last whole tile take 4×1
// strips; rows past the last whole tile take the i-p-j row loop.
//
// Flush-to-zero (contract v2, f32.ts): every operand and every product and sum loses a
// subnormal to a zero of its sign. The tiles skip those checks, which is exact when no
// operand, product or sum can be subnormal; flushIsIdentity() proves that from the smallest
// magnitudes in A and B before the launch. Otherwise (data with tiny values) every row takes
// the i-p-j row loop, which flushes at each step.
import { bufferArg, checkDistinct, checkFits, scalarArg } from "./args.js";
import { canonicalizeNaNs, F32_MIN_NORMAL, ftz } from "./f32.js";
import type { KernelSpec, ResolvedArg } from "./types.js";

/** Rows and columns of C per register tile. */
const TILE = 4;
/** Values of p per panel of B: 4 KiB, whatever k is. */
const PANEL_DEPTH = 256;
/** Column t of the current tile's B columns at [t * PANEL_DEPTH, (t + 1) * PANEL_DEPTH). */
const panel = new Float32Array(TILE * PANEL_DEPTH);

function unpack(args: readonly ResolvedArg[]) {
  return {
    c: bufferArg(args, 0),
    a: bufferArg(args, 1),
    b: bufferArg(args, 2),
    m: scalarArg(args, 3),
    n: scalarArg(args, 4),
    k: scalarArg(args, 5),
  };
}

/** B[p0..p0+depth)[j..j+4) into the panel, each column contiguous. */
function fillPanel(bf: Float32Array, j: number, n: number, p0: number, depth: number) {
  const d = PANEL_DEPTH;
  for (let q = 0, bIndex = p0 * n + j; q < depth; q++, bIndex += n) {
    panel[q] = bf[bIndex]!;
    panel[d + q] = bf[bIndex + 1]!;
    panel[2 * d + q] = bf[bIndex + 2]!;
    panel[3 * d + q] = bf[bIndex + 3]!;
  }
}

/** Adds p in [p0, p0+depth) to the sums of C[i..i+4)[j..j+4), kept in locals meanwhile. */
// biome-ignore format: the tile reads as a grid, one row of C per line
function tile4x4(
  cf: Float32Array,
  af: Float32Array,
  i: number,
  j: number,
  n: number,
  k: number,
  p0: number,
  depth: number,
) {
  const f = Math.fround;
  const d = PANEL_DEPTH;
  const a0 = i * k + p0;
  const a1 = a0 + k;
  const a2 = a1 + k;
  const a3 = a2 + k;
  let c = i * n + j;
  let s00 = cf[c]!, s01 = cf[c + 1]!, s02 = cf[c + 2]!, s03 = cf[c + 3]!;
  c += n;
  let s10 = cf[c]!, s11 = cf[c + 1]!, s12 = cf[c + 2]!, s13 = cf[c + 3]!;
  c += n;
  let s20 = cf[c]!, s21 = cf[c + 1]!, s22 = cf[c + 2]!, s23 = cf[c + 3]!;
  c += n;
  let s30 = cf[c]!, s31 = cf[c + 1]!, s32 = cf[c + 2]!, s33 = cf[c + 3]!;
  for (let q = 0; q < depth; q++) {
    const x0 = af[a0 + q]!;
    const x1 = af[a1 + q]!;
    const x2 = af[a2 + q]!;
    const x3 = af[a3 + q]!;
    const b0 = panel[q]!;
    const b1 = panel[d + q]!;
    const b2 = panel[2 * d + q]!;
    const b3 = panel[3 * d + q]!;
    s00 = f(s00 + f(x0 * b0)); s01 = f(s01 + f(x0 * b1)); s02 = f(s02 + f(x0 * b2)); s03 = f(s03 + f(x0 * b3));
    s10 = f(s10 + f(x1 * b0)); s11 = f(s11 + f(x1 * b1)); s12 = f(s12 + f(x1 * b2)); s13 = f(s13 + f(x1 * b3));
    s20 = f(s20 + f(x2 * b0)); s21 = f(s21 + f(x2 * b1)); s22 = f(s22 + f(x2 * b2)); s23 = f(s23 + f(x2 * b3));
    s30 = f(s30 + f(x3 * b0)); s31 = f(s31 + f(x3 * b1)); s32 = f(s32 + f(x3 * b2)); s33 = f(s33 + f(x3 * b3));
  }
  c = i * n + j;
  cf[c] = s00; cf[c + 1] = s01; cf[c + 2] = s02; cf[c + 3] = s03;
  c += n;
  cf[c] = s10; cf[c + 1] = s11; cf[c + 2] = s12; cf[c + 3] = s13;
  c += n;
  cf[c] = s20; cf[c + 1] = s21; cf[c + 2] = s22; cf[c + 3] = s23;
  c += n;
  cf[c] = s30; cf[c + 1] = s31; cf[c + 2] = s32; cf[c + 3] = s33;
}

/** C[i..i+4)[j] with its four sums in locals: the columns right of the last whole tile. */
function strip4x1(
  cf: Float32Array,
  af: Float32Array,
  bf: Float32Array,
  i: number,
  j: number,
  n: number,
  k: number,
) {
  const f = Math.fround;
  const a0 = i * k;
  const a1 = a0 + k;
  const a2 = a1 + k;
  const a3 = a2 + k;
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  for (let p = 0, bIndex = j; p < k; p++, bIndex += n) {
    const b = bf[bIndex]!;
    s0 = f(s0 + f(af[a0 + p]! * b));
    s1 = f(s1 + f(af[a1 + p]! * b));
    s2 = f(s2 + f(af[a2 + p]! * b));
    s3 = f(s3 + f(af[a3 + p]! * b));
  }
  const c = i * n + j;
  cf[c] = s0;
  cf[c + n] = s1;
  cf[c + 2 * n] = s2;
  cf[c + 3 * n] = s3;
}

/** Row i of C by the i-p-j loop, flushing every operand, product and sum. */
function row(
  cf: Float32Array,
  af: Float32Array,
  bf: Float32Array,
  i: number,
  n: number,
  k: number,
) {
  const f = Math.fround;
  const cRow = i * n;
  const cEnd = cRow + n;
  cf.fill(0, cRow, cEnd);
  const aRow = i * k;
  for (let p = 0; p < k; p++) {
    const aip = ftz(af[aRow + p]!);
    let bIndex = p * n;
    for (let cIndex = cRow; cIndex < cEnd; cIndex++, bIndex++) {
      cf[cIndex] = ftz(f(cf[cIndex]! + ftz(f(aip * ftz(bf[bIndex]!)))));
    }
  }
}

/** The smallest nonzero magnitude among values[0..count), NaN aside; +inf when there is none. */
function smallestMagnitude(values: Float32Array, count: number): number {
  let smallest = Number.POSITIVE_INFINITY;
  for (let i = 0; i < count; i++) {
    const magnitude = Math.abs(values[i]!);
    if (magnitude < smallest && magnitude !== 0) smallest = magnitude;
  }
  return smallest;
}

/** Products of magnitude at least this are multiples of 2^-125, and so are all their sums. */
const SAFE_PRODUCT = 2 ** -102;

/**
 * True when flushing cannot change any value of this product, so the tiles may skip it: no
 * operand is subnormal, and every nonzero finite product has a magnitude of at least 2^-102.
 * Such a product is a float32 with exponent ≥ -102, a multiple of 2^-125; sums of multiples of
 * 2^-125 are multiples of 2^-125 (below 2^-101 exactly representable, above it on a coarser
 * grid), so a nonzero one is at least 2^-125 in magnitude: never subnormal. Zeros, infinities
 * and NaNs never make a subnormal either.
 */
export function flushIsIdentity(
  af: Float32Array,
  bf: Float32Array,
  m: number,
  n: number,
  k: number,
) {
  const smallestA = smallestMagnitude(af, m * k);
  if (smallestA < F32_MIN_NORMAL) return false;
  const smallestB = smallestMagnitude(bf, k * n);
  return smallestB >= F32_MIN_NORMAL && smallestA * smallestB >= SAFE_PRODUCT;
}

function multiply(
  cf: Float32Array,
  af: Float32Array,
  bf: Float32Array,
  m: number,
  n: number,
  k: number,
) {
  if (!flushIsIdentity(af, bf, m, n, k)) {
    for (let i = 0; i < m; i++) row(cf, af, bf, i, n, k);
    return;
  }
  const mTiled = m - (m % TILE);
  const nTiled = n - (n % TILE);
  // The tiles' sums start from +0 in C (k = 0 leaves them so).
  cf.fill(0, 0, mTiled * n);
  for (let j = 0; j < nTiled; j += TILE) {
    for (let p0 = 0; p0 < k; p0 += PANEL_DEPTH) {
      const depth = Math.min(PANEL_DEPTH, k - p0);
      fillPanel(bf, j, n, p0, depth);
      for (let i = 0; i < mTiled; i += TILE) tile4x4(cf, af, i, j, n, k, p0, depth);
    }
  }
  for (let i = 0; i < mTiled; i += TILE) {
    for (let j = nTiled; j < n; j++) strip4x1(cf, af, bf, i, j, n, k);
  }
  for (let i = mTiled; i < m; i++) row(cf, af, bf, i, n, k);
}

export const gemmF32Kernel: KernelSpec = {
  name: "gemm_f32",
  slots: [
    { name: "c", kind: "buffer" },
    { name: "a", kind: "buffer" },
    { name: "b", kind: "buffer" },
    { name: "m", kind: "u32" },
    { name: "n", kind: "u32" },
    { name: "k", kind: "u32" },
  ],
  validate(args) {
    const { c, a, b, m, n, k } = unpack(args);
    return (
      checkDistinct("c", c, "a", a) ??
      checkDistinct("c", c, "b", b) ??
      checkFits("c", c, m, n) ??
      checkFits("a", a, m, k) ??
      checkFits("b", b, k, n)
    );
  },
  work(args) {
    // k = 0 still writes m*n zeros.
    const { m, n, k } = unpack(args);
    return m * n * Math.max(k, 1);
  },
  run(args) {
    const { c, a, b, m, n, k } = unpack(args);
    // An empty C must cost nothing even when m or k is huge.
    if (m === 0 || n === 0) return;
    multiply(c.f32, a.f32, b.f32, m, n, k);
    canonicalizeNaNs(c.f32, c.u32, 0, m * n);
  },
};
