// increment_u32(buf, n, delta): buf[i] = (buf[i] + delta) mod 2^32. Deliberately not idempotent,
// so applying a replicated launch twice shows up in the digest.
import { bufferArg, checkFits, scalarArg } from "./args.js";
import type { KernelSpec, ResolvedArg } from "./types.js";

function unpack(args: readonly ResolvedArg[]) {
  return { buf: bufferArg(args, 0), n: scalarArg(args, 1), delta: scalarArg(args, 2) };
}

export const incrementU32Kernel: KernelSpec = {
  name: "increment_u32",
  slots: [
    { name: "buf", kind: "buffer" },
    { name: "n", kind: "u32" },
    { name: "delta", kind: "u32" },
  ],
  validate(args) {
    const { buf, n } = unpack(args);
    return checkFits("buf", buf, n);
  },
  work(args) {
    return unpack(args).n;
  },
  run(args) {
    const { buf, n, delta } = unpack(args);
    const values = buf.u32;
    for (let i = 0; i < n; i++) values[i] = (values[i]! + delta) >>> 0;
  },
};
