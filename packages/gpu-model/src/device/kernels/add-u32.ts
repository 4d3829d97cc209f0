// add_u32(dst, a, b, n): dst[i] = (a[i] + b[i]) mod 2^32. Any aliasing is fine: element i is
// read before it is written and no other element is touched.
import { bufferArg, checkFits, scalarArg } from "./args.js";
import type { KernelSpec, ResolvedArg } from "./types.js";

function unpack(args: readonly ResolvedArg[]) {
  return {
    dst: bufferArg(args, 0),
    a: bufferArg(args, 1),
    b: bufferArg(args, 2),
    n: scalarArg(args, 3),
  };
}

/** Work units per element: measured cost relative to fill (bench/kernel-speed.ts). */
const WORK_PER_ELEMENT = 2;

export const addU32Kernel: KernelSpec = {
  name: "add_u32",
  slots: [
    { name: "dst", kind: "buffer" },
    { name: "a", kind: "buffer" },
    { name: "b", kind: "buffer" },
    { name: "n", kind: "u32" },
  ],
  validate(args) {
    const { dst, a, b, n } = unpack(args);
    return checkFits("dst", dst, n) ?? checkFits("a", a, n) ?? checkFits("b", b, n);
  },
  work(args) {
    return unpack(args).n * WORK_PER_ELEMENT;
  },
  run(args) {
    const { dst, a, b, n } = unpack(args);
    const out = dst.u32;
    const x = a.u32;
    const y = b.u32;
    for (let i = 0; i < n; i++) out[i] = (x[i]! + y[i]!) >>> 0;
  },
};
