// gemm_f32(c, a, b, m, n, k): C(m×n) = A(m×k)·B(k×n), row-major float32. Each c[i][j] is
// fround-accumulated from +0 over p ascending, exactly as the naive i-j-p loop. c may not alias
// a or b (that would read partial sums); a may alias b.
//
// Register blocking: C is computed in 4×4 tiles whose sixteen running sums stay in locals
// while p runs from 0 to k, so each loaded element of A serves four products and each of B
// four more (the plain i-p-j loop loaded and stored C once per product). Every sum still sees
// its products in p order, rounding through Math.fround at each step, so the result is bit for
// bit that of the naive loop. Columns past the last whole tile take 4×1 strips; rows past the
// last whole tile take the i-p-j row loop, whose running sums live in C (already fround-ed, so
// storing them in the f32 view loses nothing).
import { bufferArg, checkDistinct, checkFits, scalarArg } from "./args.js";
import { canonicalizeNaNs } from "./f32.js";
import type { KernelSpec, ResolvedArg } from "./types.js";

/** Rows and columns of C per register tile. */
const TILE = 4;

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

/** C[i..i+4)[j..j+4) with the sixteen sums in locals. */
// biome-ignore format: the tile reads as a grid, one row of C per line
function tile4x4(
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
  let s00 = 0, s01 = 0, s02 = 0, s03 = 0;
  let s10 = 0, s11 = 0, s12 = 0, s13 = 0;
  let s20 = 0, s21 = 0, s22 = 0, s23 = 0;
  let s30 = 0, s31 = 0, s32 = 0, s33 = 0;
  for (let p = 0, bIndex = j; p < k; p++, bIndex += n) {
    const x0 = af[a0 + p]!;
    const x1 = af[a1 + p]!;
    const x2 = af[a2 + p]!;
    const x3 = af[a3 + p]!;
    const b0 = bf[bIndex]!;
    const b1 = bf[bIndex + 1]!;
    const b2 = bf[bIndex + 2]!;
    const b3 = bf[bIndex + 3]!;
    s00 = f(s00 + f(x0 * b0)); s01 = f(s01 + f(x0 * b1)); s02 = f(s02 + f(x0 * b2)); s03 = f(s03 + f(x0 * b3));
    s10 = f(s10 + f(x1 * b0)); s11 = f(s11 + f(x1 * b1)); s12 = f(s12 + f(x1 * b2)); s13 = f(s13 + f(x1 * b3));
    s20 = f(s20 + f(x2 * b0)); s21 = f(s21 + f(x2 * b1)); s22 = f(s22 + f(x2 * b2)); s23 = f(s23 + f(x2 * b3));
    s30 = f(s30 + f(x3 * b0)); s31 = f(s31 + f(x3 * b1)); s32 = f(s32 + f(x3 * b2)); s33 = f(s33 + f(x3 * b3));
  }
  let c = i * n + j;
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

/** Row i of C by the i-p-j loop: the rows below the last whole tile. */
function row(
  cf: Float32Array,
  af: Float32Array,
  bf: Float32Array,
  i: number,
  n: number,
  k: number,
) {
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

function multiply(
  cf: Float32Array,
  af: Float32Array,
  bf: Float32Array,
  m: number,
  n: number,
  k: number,
) {
  const mTiled = m - (m % TILE);
  const nTiled = n - (n % TILE);
  for (let i = 0; i < mTiled; i += TILE) {
    for (let j = 0; j < nTiled; j += TILE) tile4x4(cf, af, bf, i, j, n, k);
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
