// copy(dst, src, n): dst.u32[i] = src.u32[i] for i < n. Copies bits, so NaN payloads survive.
import { bufferArg, checkFits, scalarArg } from "./args.js";
import type { KernelSpec, ResolvedArg } from "./types.js";

function unpack(args: readonly ResolvedArg[]) {
  return { dst: bufferArg(args, 0), src: bufferArg(args, 1), n: scalarArg(args, 2) };
}

export const copyKernel: KernelSpec = {
  name: "copy",
  slots: [
    { name: "dst", kind: "buffer" },
    { name: "src", kind: "buffer" },
    { name: "n", kind: "u32" },
  ],
  validate(args) {
    const { dst, src, n } = unpack(args);
    return checkFits("dst", dst, n) ?? checkFits("src", src, n);
  },
  work(args) {
    return unpack(args).n;
  },
  run(args) {
    const { dst, src, n } = unpack(args);
    // Copying a buffer object onto itself is the identity.
    if (dst.id === src.id) return;
    dst.u32.set(src.u32.subarray(0, n));
  },
};
