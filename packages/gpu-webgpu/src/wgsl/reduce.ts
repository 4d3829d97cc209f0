// reduce_sum_f32 in WGSL: one pass of contract v2's fixed tree. Workgroup w reduces elements
// [w*2048, min((w+1)*2048, L)) of `x`: lane t adds x[base + t + 256*r] for r = 0..7 in order
// from +0, then a halving tree over the 256 lane sums in shared memory (stride 128 .. 1). Each
// value is flushed (ftz). The block's sum goes to dst[w] through canonbits; the executor runs
// passes until one value is left, the last one into out[0].
export const REDUCE_PASS_WGSL = /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
var<workgroup> s: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let w = flatGroup(wid);
  if (w >= p.groups) { return; }
  let base = w * 2048u;
  let end = min(base + 2048u, p.a0);
  var acc = p.zero;
  for (var r = 0u; r < 8u; r++) {
    let i = base + li + 256u * r;
    if (i < end) { acc = ftz(acc + ftz(x[i])); }
  }
  s[li] = acc;
  workgroupBarrier();
  for (var stride = 128u; stride > 0u; stride = stride >> 1u) {
    if (li < stride) { s[li] = ftz(s[li] + s[li + stride]); }
    workgroupBarrier();
  }
  if (li == 0u) { dst[w] = canonbits(s[0]); }
}`;

/** Elements one workgroup reduces. */
export const REDUCE_BLOCK = 2048;
