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

// A product as contract v2 has it: rounded to f32, then flushed if subnormal. The H100 flushes
// a product whose exact value is below 2^-126 even when it rounds up to 2^-126 (tininess
// before rounding). So a product that comes out zero from nonzero (flushed, so normal)
// operands is decided exactly on the integer side: the 48-bit product of the significands
// against the least exact value that rounds up to 2^-126, (2^24 - 1) * 2^-150 (ties to even).
fn roundsToMinNormal(ua: u32, ub: u32) -> bool {
  let k = i32((ua >> 23u) & 0xffu) + i32((ub >> 23u) & 0xffu) - 150;
  if (k <= -25) { return false; }
  if (k >= -22) { return true; }
  let ma = (ua & 0x7fffffu) | 0x800000u;
  let mb = (ub & 0x7fffffu) | 0x800000u;
  let mh = ma >> 12u;
  let ml = ma & 0xfffu;
  let nh = mb >> 12u;
  let nl = mb & 0xfffu;
  let mid = mh * nl + ml * nh;
  let t = ml * nl + ((mid & 0xfffu) << 12u);
  let hi = mh * nh + (mid >> 12u) + (t >> 24u);
  if (k == -24) { return hi >= 0xffffffu; }
  return hi * 2u + ((t & 0xffffffu) >> 23u) >= 0xffffffu;
}

fn fmul(a: f32, b: f32) -> f32 {
  let q = ftz(a * b);
  let ua = bitcast<u32>(a);
  let ub = bitcast<u32>(b);
  // Tested on the bits: a float comparison may assume no NaN (WGSL allows it; on the H100
  // NaN != 0.0 came out false).
  let zero = (bitcast<u32>(q) & 0x7fffffffu) == 0u;
  if (!zero || (ua & 0x7fffffffu) == 0u || (ub & 0x7fffffffu) == 0u) { return q; }
  let sign = (ua ^ ub) & 0x80000000u;
  if (roundsToMinNormal(ua, ub)) { return bitcast<f32>(sign | 0x00800000u); }
  return bitcast<f32>(sign);
}

fn canonbits(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return 0x7fc00000u; }
  return b;
}

fn flatGroup(wid: vec3<u32>) -> u32 { return wid.y * p.gx + wid.x; }
`;
