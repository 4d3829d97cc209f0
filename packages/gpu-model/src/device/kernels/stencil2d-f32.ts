// stencil2d_f32(dst, src, width, height, iterations, alpha): a hotspot-like 5-point stencil on
// a row-major width×height float32 grid, neighbours clamped at the edges:
//   new = c + alpha*((((n + s) + e) + w) - 4c), fround after every operation,
// flushed (contract v2, f32.ts): src's cells and alpha lose a subnormal to a zero of its sign
// as operands, and so does every result. src is only read; it is flushed into a scratch grid
// and two scratch grids ping-pong between iterations; the last one is copied into dst.
// iterations = 0 copies src's bits unchanged (a copy, no arithmetic). dst may not alias src.
import { bufferArg, checkDistinct, checkFits, checkPositive, scalarArg } from "./args.js";
import { canonicalizeNaNs, ftz } from "./f32.js";
import type { KernelSpec, ResolvedArg } from "./types.js";

function unpack(args: readonly ResolvedArg[]) {
  return {
    dst: bufferArg(args, 0),
    src: bufferArg(args, 1),
    width: scalarArg(args, 2),
    height: scalarArg(args, 3),
    iterations: scalarArg(args, 4),
    alpha: scalarArg(args, 5),
  };
}

/** One iteration from `from` into `to`, both exactly width*height long. */
function step(from: Float32Array, to: Float32Array, width: number, height: number, alpha: number) {
  const f = Math.fround;
  const lastX = width - 1;
  for (let y = 0; y < height; y++) {
    const row = y * width;
    const north = (y > 0 ? y - 1 : 0) * width;
    const south = (y < height - 1 ? y + 1 : y) * width;
    for (let x = 0; x < width; x++) {
      const c = from[row + x]!;
      const n = from[north + x]!;
      const s = from[south + x]!;
      const e = from[row + (x < lastX ? x + 1 : x)]!;
      const w = from[row + (x > 0 ? x - 1 : 0)]!;
      const sum = ftz(f(ftz(f(ftz(f(n + s)) + e)) + w));
      // 4c needs no flush: c is a flushed value, so 4c is ±0, at least 2^-124, inf or NaN.
      const laplacian = ftz(f(sum - f(4 * c)));
      to[row + x] = ftz(f(c + ftz(f(alpha * laplacian))));
    }
  }
}

/** Work units per cell and iteration: five reads and eight rounded operations, six of them
 * checked for flush-to-zero (bench/kernel-speed.ts: about 2x contract v1's 8 units). */
const WORK_PER_CELL = 16;

export const stencil2dF32Kernel: KernelSpec = {
  name: "stencil2d_f32",
  slots: [
    { name: "dst", kind: "buffer" },
    { name: "src", kind: "buffer" },
    { name: "width", kind: "u32" },
    { name: "height", kind: "u32" },
    { name: "iterations", kind: "u32" },
    { name: "alpha", kind: "f32" },
  ],
  validate(args) {
    const { dst, src, width, height } = unpack(args);
    return (
      checkPositive("width", width) ??
      checkPositive("height", height) ??
      checkDistinct("dst", dst, "src", src) ??
      checkFits("dst", dst, width, height) ??
      checkFits("src", src, width, height)
    );
  },
  work(args) {
    const { width, height, iterations } = unpack(args);
    return width * height * Math.max(iterations, 1) * WORK_PER_CELL;
  },
  run(args) {
    const { dst, src, width, height, iterations, alpha: alphaArg } = unpack(args);
    const alpha = ftz(alphaArg);
    const cells = width * height;
    if (iterations === 0) {
      dst.u32.set(src.u32.subarray(0, cells));
      return;
    }
    let from = new Float32Array(cells);
    let to = new Float32Array(cells);
    const srcF32 = src.f32;
    for (let i = 0; i < cells; i++) from[i] = ftz(srcF32[i]!);
    for (let i = 0; i < iterations; i++) {
      step(from, to, width, height, alpha);
      const done = to;
      to = from;
      from = done;
    }
    dst.f32.set(from);
    canonicalizeNaNs(dst.f32, dst.u32, 0, cells);
  },
};
