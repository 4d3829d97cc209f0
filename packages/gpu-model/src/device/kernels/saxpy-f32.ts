// saxpy_f32(y, x, n, a): y[i] = fround(fround(a*x[i]) + y[i]), flushed (contract v2: a, x[i],
// y[i], the product and the sum each lose a subnormal to a zero of its sign). y may alias x
// (elementwise).
import { bufferArg, checkFits, scalarArg } from "./args.js";
import { CANONICAL_NAN_BITS, ftz } from "./f32.js";
import type { KernelSpec, ResolvedArg } from "./types.js";

function unpack(args: readonly ResolvedArg[]) {
  return {
    y: bufferArg(args, 0),
    x: bufferArg(args, 1),
    n: scalarArg(args, 2),
    a: scalarArg(args, 3),
  };
}

/** Work units per element: measured cost relative to fill (bench/kernel-speed.ts); 2 before
 * contract v2, whose four flush checks per element made it about 2.5x slower on this CPU. */
const WORK_PER_ELEMENT = 5;

export const saxpyF32Kernel: KernelSpec = {
  name: "saxpy_f32",
  slots: [
    { name: "y", kind: "buffer" },
    { name: "x", kind: "buffer" },
    { name: "n", kind: "u32" },
    { name: "a", kind: "f32" },
  ],
  validate(args) {
    const { y, x, n } = unpack(args);
    return checkFits("y", y, n) ?? checkFits("x", x, n);
  },
  work(args) {
    return unpack(args).n * WORK_PER_ELEMENT;
  },
  run(args) {
    const { y, x, n, a: aArg } = unpack(args);
    const a = ftz(aArg);
    const yf = y.f32;
    const yu = y.u32;
    const xf = x.f32;
    for (let i = 0; i < n; i++) {
      const product = ftz(Math.fround(a * ftz(xf[i]!)));
      const value = ftz(Math.fround(product + ftz(yf[i]!)));
      if (Number.isNaN(value)) yu[i] = CANONICAL_NAN_BITS;
      else yf[i] = value;
    }
  },
};
