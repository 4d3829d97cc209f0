// stencil2d_f32 in WGSL: one iteration from `src` into `dst` (a0 = width, a1 = height,
// a2 = alpha's bits, a3 = width*height), neighbours clamped at the edges, every operand and
// result flushed, products kept from fusing (p.one), NaNs canonical:
//   new = c + alpha*((((n + s) + e) + w) - 4c)
export const STENCIL_STEP_WGSL = /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read> src: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let g = flatGroup(wid);
  if (g >= p.groups) { return; }
  let i = g * 256u + li;
  if (i >= p.a3) { return; }
  let width = p.a0;
  let height = p.a1;
  let y = i / width;
  let x = i % width;
  let row = y * width;
  let north = select(y - 1u, 0u, y == 0u) * width;
  let south = select(y + 1u, y, y + 1u >= height) * width;
  let c = ftz(src[i]);
  let n = ftz(src[north + x]);
  let s = ftz(src[south + x]);
  let e = ftz(src[row + select(x + 1u, x, x + 1u >= width)]);
  let w = ftz(src[row + select(x - 1u, 0u, x == 0u)]);
  let alpha = ftz(bitcast<f32>(p.a2));
  let sum = ftz(ftz(ftz(n + s) + e) + w);
  let c4 = ftz(4.0f * c) * p.one;
  let lap = ftz(sum - c4);
  let r = ftz(fmul(alpha, lap) * p.one + c);
  dst[i] = canonbits(r);
}`;
