// gemm_f32(c, a, b, m, n, k): C(m×n) = A(m×k)·B(k×n), row-major float32. Each c[i][j] is
// fround-accumulated from +0 over p ascending, exactly as the naive i-j-p loop, with contract
// v2's flushes (f32.ts). c may not alias a or b (that would read partial sums); a may alias b.
//
// Whole 4×8 tiles of C run in WebAssembly with f32x4 arithmetic (gemm-f32-tiles.ts): each
// vector holds four sums of C, and each sum still sees its products in p order, rounded to
// float32 at every product and sum (no fused multiply-add), so the bits are the naive loop's;
// only the order in which *different* elements are computed changes. Columns past the last
// whole tile take 4×1 strips, rows past it the i-p-j row loop, both here.
//
// Flush-to-zero: before a launch, flushIsIdentity() tries to prove from the smallest
// magnitudes in A and B that no operand, product or sum can be subnormal; then the tiles skip
// the flushes. Otherwise (data with tiny values) they flush every product and sum, and the
// operands as they are copied in. The strips and rows always flush.
import { bufferArg, checkDistinct, checkFits, scalarArg } from "./args.js";
import { canonicalizeNaNs, F32_MIN_NORMAL, ftz } from "./f32.js";
import { TILE_COLUMNS, TILE_ROWS, wasmTiles } from "./gemm-f32-tiles.js";
import type { KernelSpec, ResolvedArg } from "./types.js";

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
    const b = ftz(bf[bIndex]!);
    s0 = ftz(f(s0 + ftz(f(ftz(af[a0 + p]!) * b))));
    s1 = ftz(f(s1 + ftz(f(ftz(af[a1 + p]!) * b))));
    s2 = ftz(f(s2 + ftz(f(ftz(af[a2 + p]!) * b))));
    s3 = ftz(f(s3 + ftz(f(ftz(af[a3 + p]!) * b))));
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
  const mTiled = m - (m % TILE_ROWS);
  const nTiled = n - (n % TILE_COLUMNS);
  const tiled =
    mTiled > 0 &&
    nTiled > 0 &&
    k > 0 &&
    wasmTiles(cf, af, bf, n, k, mTiled, nTiled, !flushIsIdentity(af, bf, m, n, k));
  if (!tiled) {
    for (let i = 0; i < m; i++) row(cf, af, bf, i, n, k);
    return;
  }
  for (let i = 0; i < mTiled; i += TILE_ROWS) {
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
