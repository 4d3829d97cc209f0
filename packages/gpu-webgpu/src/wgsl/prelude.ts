// What every WGSL module of the backend starts with: the launch parameters (one uniform block
// per dispatch), the flush-to-zero and canonical-NaN rules of kernel contract v2, and the flat
// workgroup index of a 2-D grid (a dimension holds at most 65535 workgroups).
//
// `one` is 1.0 read from the uniform block: `(a * b) * p.one + c` cannot be fused into one FMA
// by the driver's compiler (an FMA of an already-rounded product with 1.0 equals mul-round then
// add-round), which keeps the model's two roundings (../shared/GPU.md, trap 1). `ftz` flushes
// explicitly, so a GPU that keeps subnormals gives the model's bits too; one that flushes in
// hardware (the H100 through Vulkan) gives the same bits either way. Sums start from `zero`
// (+0.0 from the uniform block), not a literal: a compiler that folds `0.0 + x` into `x` (as
// llvmpipe does) would turn the model's +0 + -0 = +0 into -0.

/** u32 words of the parameter block: a0..a7 (launch scalars), one, gx, groups, zero. */
export const PARAM_WORDS = 12;
export const PARAM_BYTES = PARAM_WORDS * 4;
/** Word index of `one`, `gx` and `groups` in the parameter block. */
export const PARAM_ONE = 8;
export const PARAM_GX = 9;
export const PARAM_GROUPS = 10;

export const PRELUDE = /* wgsl */ `
struct Params {
  a0: u32, a1: u32, a2: u32, a3: u32, a4: u32, a5: u32, a6: u32, a7: u32,
  one: f32, gx: u32, groups: u32, zero: f32,
}
@group(0) @binding(0) var<uniform> p: Params;

fn ftz(x: f32) -> f32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7f800000u) == 0u) { return bitcast<f32>(b & 0x80000000u); }
  return x;
}

fn canonbits(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return 0x7fc00000u; }
  return b;
}

fn flatGroup(wid: vec3<u32>) -> u32 { return wid.y * p.gx + wid.x; }
`;
