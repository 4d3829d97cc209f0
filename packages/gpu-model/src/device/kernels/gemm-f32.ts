// gemm_f32(c, a, b, m, n, k): C(m×n) = A(m×k)·B(k×n), row-major float32. Each c[i][j] is
// fround-accumulated from +0 over p ascending, exactly as the naive i-j-p loop. The loops run
// i-p-j so the inner loop walks rows of B and C contiguously; every c[i][j] still sees its
// products in p order, and storing the running sum in the f32 view loses nothing because it is
// already fround-ed. c may not alias a or b (that would read partial sums); a may alias b.
import { bufferArg, checkDistinct, checkFits, scalarArg } from "./args.js";
import { canonicalizeNaNs } from "./f32.js";
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

function multiply(
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
