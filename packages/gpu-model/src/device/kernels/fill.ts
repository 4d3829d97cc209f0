// fill(dst, n, value): dst.u32[i] = value for i < n.
import { bufferArg, checkFits, scalarArg } from "./args.js";
import type { KernelSpec, ResolvedArg } from "./types.js";

function unpack(args: readonly ResolvedArg[]) {
  return { dst: bufferArg(args, 0), n: scalarArg(args, 1), value: scalarArg(args, 2) };
}

export const fillKernel: KernelSpec = {
  name: "fill",
  slots: [
    { name: "dst", kind: "buffer" },
    { name: "n", kind: "u32" },
    { name: "value", kind: "u32" },
  ],
  validate(args) {
    const { dst, n } = unpack(args);
    return checkFits("dst", dst, n);
  },
  work(args) {
    return unpack(args).n;
  },
  run(args) {
    const { dst, n, value } = unpack(args);
    dst.u32.fill(value, 0, n);
  },
};
