// The float32 rules of kernel contract v2 (docs/gpu-model.md, "Kernel contract"), shared by
// every float kernel.
//
// Flush-to-zero: a GPU (an H100 through Dawn/Vulkan, ../shared/GPU.md) treats each subnormal
// f32 operand of + - * as a zero of its sign and flushes each subnormal result the same way;
// WGSL offers no way to ask otherwise. The model does the same, so both give equal bits: each
// operand loaded from memory (or taken from a scalar argument) goes through ftz(), and each
// rounded result of + - * too. Loads, stores and copies keep every bit.
//
// Canonical NaN: which NaN payload an operation returns depends on operand order in the
// machine code (x86 keeps the first operand's payload; the GPU writes 0x7fffffff), and the JIT
// may reorder a commutative operation differently from the interpreter. So kernels write one
// canonical quiet NaN instead. NaN is sticky in +, -, *, so canonicalising only the final value
// of each element is exact.

/** The bits of the only NaN a float32 kernel writes: positive quiet NaN, zero payload. */
export const CANONICAL_NAN_BITS = 0x7fc00000;

/** The smallest normal float32, 2^-126: a nonzero magnitude below it is subnormal. */
export const F32_MIN_NORMAL = 2 ** -126;

/**
 * Flush-to-zero: a subnormal float32 becomes a zero of its sign (x * 0 keeps the sign); any
 * other value, ±0, ±inf and NaN included, is returned as it is. The branch is taken only for
 * zeros and subnormals, and for zeros it changes nothing.
 */
export function ftz(x: number): number {
  return Math.abs(x) < F32_MIN_NORMAL ? x * 0 : x;
}

/** Rewrites every NaN among elements [start, end) of a buffer's f32 view to canonical bits. */
export function canonicalizeNaNs(f32: Float32Array, u32: Uint32Array, start: number, end: number) {
  for (let i = start; i < end; i++) {
    const value = f32[i]!;
    if (Number.isNaN(value)) u32[i] = CANONICAL_NAN_BITS;
  }
}
