// reduce_sum_f32(out, in, n): out.f32[0] = fround-accumulated sum of in[0..n) in index order,
// from +0. Sequential on purpose: the order is the result's definition. out may not alias in.
import { bufferArg, checkDistinct, checkFits, scalarArg } from "./args.js";
import { CANONICAL_NAN_BITS } from "./f32.js";
import type { KernelSpec, ResolvedArg } from "./types.js";

function unpack(args: readonly ResolvedArg[]) {
  return { out: bufferArg(args, 0), input: bufferArg(args, 1), n: scalarArg(args, 2) };
}

/** Work units per element: the sum is one dependent chain (bench/kernel-speed.ts). */
const WORK_PER_ELEMENT = 2;

export const reduceSumF32Kernel: KernelSpec = {
  name: "reduce_sum_f32",
  slots: [
    { name: "out", kind: "buffer" },
    { name: "in", kind: "buffer" },
    { name: "n", kind: "u32" },
  ],
  validate(args) {
    const { out, input, n } = unpack(args);
    return checkDistinct("out", out, "in", input) ?? checkFits("in", input, n);
  },
  work(args) {
    return unpack(args).n * WORK_PER_ELEMENT;
  },
  run(args) {
    const { out, input, n } = unpack(args);
    const values = input.f32;
    let sum = 0;
    for (let i = 0; i < n; i++) sum = Math.fround(sum + values[i]!);
    if (Number.isNaN(sum)) out.u32[0] = CANONICAL_NAN_BITS;
    else out.f32[0] = sum;
  },
};
