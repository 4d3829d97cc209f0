// Float32 results leave a kernel with one NaN bit pattern. Which NaN payload an operation
// returns depends on operand order in the machine code (x86 keeps the first operand's payload),
// and the JIT may reorder a commutative operation differently from the interpreter. Two replicas
// at different JIT tiers could then write different NaN bits for the same launch, so kernels
// write this canonical quiet NaN instead. NaN is sticky in +, -, *, so canonicalising only the
// final value of each element is exact.

/** The bits of the only NaN a float32 kernel writes: positive quiet NaN, zero payload. */
export const CANONICAL_NAN_BITS = 0x7fc00000;

/** Rewrites every NaN among elements [start, end) of a buffer's f32 view to canonical bits. */
export function canonicalizeNaNs(f32: Float32Array, u32: Uint32Array, start: number, end: number) {
  for (let i = start; i < end; i++) {
    const value = f32[i]!;
    if (Number.isNaN(value)) u32[i] = CANONICAL_NAN_BITS;
  }
}
