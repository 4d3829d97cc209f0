// histogram_u32(hist, in, n, bins): clears hist[0..bins), then hist[in[i] % bins] += 1 for
// i < n. hist may not alias in (counting would rewrite the input it is reading).
import { bufferArg, checkDistinct, checkFits, checkPositive, scalarArg } from "./args.js";
import type { KernelSpec, ResolvedArg } from "./types.js";

function unpack(args: readonly ResolvedArg[]) {
  return {
    hist: bufferArg(args, 0),
    input: bufferArg(args, 1),
    n: scalarArg(args, 2),
    bins: scalarArg(args, 3),
  };
}

/**
 * Work units per input element: a count at an address the data picks (a cache miss once the
 * bins outgrow the caches) after a modulo of a u32 that may not be a small integer; measured
 * against fill by bench/kernel-speed.ts. Clearing a bin is one unit.
 */
const WORK_PER_ELEMENT = 32;

export const histogramU32Kernel: KernelSpec = {
  name: "histogram_u32",
  slots: [
    { name: "hist", kind: "buffer" },
    { name: "in", kind: "buffer" },
    { name: "n", kind: "u32" },
    { name: "bins", kind: "u32" },
  ],
  validate(args) {
    const { hist, input, n, bins } = unpack(args);
    return (
      checkPositive("bins", bins) ??
      checkDistinct("hist", hist, "in", input) ??
      checkFits("hist", hist, bins) ??
      checkFits("in", input, n)
    );
  },
  work(args) {
    // Clearing the bins is work too.
    const { n, bins } = unpack(args);
    return n * WORK_PER_ELEMENT + bins;
  },
  run(args) {
    const { hist, input, n, bins } = unpack(args);
    const counts = hist.u32;
    const values = input.u32;
    counts.fill(0, 0, bins);
    for (let i = 0; i < n; i++) {
      const bin = values[i]! % bins;
      counts[bin] = counts[bin]! + 1;
    }
  },
};
