// gemm_f32 in WGSL: C(m×n) = A(m×k)·B(k×n), row-major. A workgroup of 16×16 invocations owns
// a 64×64 tile of C, each invocation 4×4 sums kept in registers; A and B pass through shared
// memory 16 values of p at a time. Every sum adds its products in ascending p from +0, as the
// model does, so tiling changes no bit: s = ftz(fmul(a, b) * one + s) (no FMA, flushed),
// operands flushed as they are loaded, results stored through canonbits.
//
// Fast chunks: while loading a chunk, the workgroup takes the least exponent of its nonzero
// operands of A and of B. When every nonzero product is then at least 2^-102, every product and
// every sum is a multiple of 2^-125 or at least 2^-103 in magnitude (the bound the CPU model's
// fast tiles use), so nothing can be subnormal and the flushes change no bit: the chunk runs
// s = (a*b) * one + s alone.
// a0 = m, a1 = n, a2 = k, a3 = tiles across n. Tiles are numbered flat (prelude's 2-D grid).
export const GEMM_TILE = 64;

export const GEMM_WGSL = /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> c: array<u32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
var<workgroup> As: array<f32, 1024>;
var<workgroup> Bs: array<f32, 1024>;
var<workgroup> minExpA: atomic<u32>;
var<workgroup> minExpB: atomic<u32>;

/** The biased exponent of a nonzero value, 255 for zero (flushed subnormals are zero). */
fn expOf(x: f32) -> u32 {
  let e = (bitcast<u32>(x) >> 23u) & 0xffu;
  return select(e, 255u, e == 0u);
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let t = flatGroup(wid);
  if (t >= p.groups) { return; }
  let m = p.a0;
  let n = p.a1;
  let k = p.a2;
  let row0 = (t / p.a3) * 64u;
  let col0 = (t % p.a3) * 64u;
  var acc: array<f32, 16>;
  for (var q = 0u; q < 16u; q++) { acc[q] = p.zero; }
  for (var p0 = 0u; p0 < k; p0 = p0 + 16u) {
    let depth = min(16u, k - p0);
    if (li == 0u) {
      atomicStore(&minExpA, 255u);
      atomicStore(&minExpB, 255u);
    }
    workgroupBarrier();
    var ea = 255u;
    var eb = 255u;
    for (var e = 0u; e < 4u; e++) {
      let idx = li + 256u * e;
      let ai = row0 + idx / 16u;
      let ak = p0 + idx % 16u;
      var av = 0.0f;
      if (ai < m && ak < k) { av = ftz(a[ai * k + ak]); }
      As[idx] = av;
      ea = min(ea, expOf(av));
      let bk = p0 + idx / 64u;
      let bj = col0 + idx % 64u;
      var bv = 0.0f;
      if (bk < k && bj < n) { bv = ftz(b[bk * n + bj]); }
      Bs[idx] = bv;
      eb = min(eb, expOf(bv));
    }
    atomicMin(&minExpA, ea);
    atomicMin(&minExpB, eb);
    workgroupBarrier();
    let fast = atomicLoad(&minExpA) + atomicLoad(&minExpB) >= 152u;
    for (var q = 0u; q < depth; q++) {
      var x: array<f32, 4>;
      var y: array<f32, 4>;
      for (var r = 0u; r < 4u; r++) {
        x[r] = As[(lid.y * 4u + r) * 16u + q];
        y[r] = Bs[q * 64u + lid.x * 4u + r];
      }
      if (fast) {
        for (var r = 0u; r < 4u; r++) {
          for (var s = 0u; s < 4u; s++) {
            acc[r * 4u + s] = (x[r] * y[s]) * p.one + acc[r * 4u + s];
          }
        }
      } else {
        for (var r = 0u; r < 4u; r++) {
          for (var s = 0u; s < 4u; s++) {
            acc[r * 4u + s] = ftz(fmul(x[r], y[s]) * p.one + acc[r * 4u + s]);
          }
        }
      }
    }
    workgroupBarrier();
  }
  for (var r = 0u; r < 4u; r++) {
    for (var s = 0u; s < 4u; s++) {
      let i = row0 + lid.y * 4u + r;
      let j = col0 + lid.x * 4u + s;
      if (i < m && j < n) { c[i * n + j] = canonbits(acc[r * 4u + s]); }
    }
  }
}`;
