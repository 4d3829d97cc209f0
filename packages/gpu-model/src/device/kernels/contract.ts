// The kernel contract's version: what every backend (the CPU model, WebGPU) computes, bit for
// bit. A standby refuses a primary whose version differs, since equal launches could give
// unequal bits. docs/gpu-model.md ("Kernel contract") states each rule and why.
//   v1: float32 rounding at every step, canonical NaN, sequential reduce_sum_f32.
//   v2: v1's rounding and canonical NaN, plus flush-to-zero of f32 operands and results of
//       + - * (f32.ts), and reduce_sum_f32 as a fixed tree of 2048-element blocks
//       (reduce-sum-f32.ts).

/** The kernel contract this model implements. */
export const KERNEL_CONTRACT_VERSION = 2;
