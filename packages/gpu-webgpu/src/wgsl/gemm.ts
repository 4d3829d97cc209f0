// gemm_f32 in WGSL: C(m×n) = A(m×k)·B(k×n), row-major. A workgroup of 16×16 invocations owns
// a 128×128 tile of C; each invocation keeps 8×8 sums in registers (16 vec4s: rows
// 4·ty..4·ty+3 and 64+4·ty.., columns 4·tx..4·tx+3 and 64+4·tx..). A and B pass through
// shared memory GEMM_DEPTH values of p at a time (A transposed, so that an invocation reads its
// 8 rows as two vec4s). Every sum adds its products in ascending p from +0, as the model does,
// so tiling changes no bit: s = ftz(fmul(a, b) * one + s) (no FMA, flushed), operands flushed
// as they are loaded, results stored through canonbits.
//
// Fast chunks: while loading a chunk, the workgroup takes the least exponent of its nonzero
// operands of A and of B. When every nonzero product is then at least 2^-102, every product and
// every sum is a multiple of 2^-125 or at least 2^-103 in magnitude (the bound the CPU model's
// fast tiles use), so nothing can be subnormal and the flushes change no bit: a full chunk runs
// s = (a*b) * one + s alone. The two least exponents live in one of two slots by chunk parity,
// so a chunk needs no barrier beyond the two around its shared-memory tiles: after this
// chunk's second barrier, invocation 0 resets the other slot — every invocation read it in the
// previous chunk, before this chunk's first barrier, and the next chunk writes it only after
// its own first barrier.
// a0 = m, a1 = n, a2 = k, a3 = tiles across n. Tiles are numbered flat (prelude's 2-D grid).
export const GEMM_TILE = 128;
/** Values of p per shared-memory chunk. */
export const GEMM_DEPTH = 16;

/** The 16 accumulators: acc{r}_{h}, row group r (0..7), column half h (0, 1). */
const ACCS = Array.from({ length: 8 }, (_, r) => [0, 1].map((h) => `acc${r}_${h}`)).flat();

/** Row r of an invocation's 8, as a component of its two A vec4s. */
const aOf = (r: number) => `xa${r >> 2}.${"xyzw"[r & 3]}`;

function fastStep(): string {
  return ACCS.map((name) => {
    const [r, h] = name.slice(3).split("_").map(Number) as [number, number];
    return `        ${name} = (vec4<f32>(${aOf(r)}) * yb${h}) * p.one + ${name};`;
  }).join("\n");
}

function slowStep(): string {
  return ACCS.map((name) => {
    const [r, h] = name.slice(3).split("_").map(Number) as [number, number];
    return `        ${name} = slowSum(${aOf(r)}, yb${h}, ${name});`;
  }).join("\n");
}

function stores(): string {
  return ACCS.map((name) => {
    const [r, h] = name.slice(3).split("_").map(Number) as [number, number];
    const row = `${r < 4 ? "" : "64u + "}ty * 4u + ${r & 3}u`;
    const col = `${h === 0 ? "" : "64u + "}tx * 4u`;
    return `  store4(row0 + ${row}, col0 + ${col}, ${name});`;
  }).join("\n");
}

/** The gemm module for chunks of `depth` values of p (8 or 16). */
export function gemmWgsl(depth: number = GEMM_DEPTH): string {
  const half = depth / 2;
  return /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> c: array<u32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
// As[q * 32 + g]: A's rows 4g..4g+3 of the tile at p0 + q; Bs[q * 32 + g]: B's columns 4g..4g+3.
var<workgroup> As: array<vec4<f32>, ${depth * 32}>;
var<workgroup> Bs: array<vec4<f32>, ${depth * 32}>;
// [2 * slot]: least exponent of the chunk's A operands, [2 * slot + 1]: of its B operands.
var<workgroup> minExp: array<atomic<u32>, 4>;

/** The biased exponent of a nonzero value, 255 for zero (flushed subnormals are zero). */
fn expOf(x: f32) -> u32 {
  let e = (bitcast<u32>(x) >> 23u) & 0xffu;
  return select(e, 255u, e == 0u);
}

fn slowSum(x: f32, y: vec4<f32>, s: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(
    ftz(fmul(x, y.x) * p.one + s.x),
    ftz(fmul(x, y.y) * p.one + s.y),
    ftz(fmul(x, y.z) * p.one + s.z),
    ftz(fmul(x, y.w) * p.one + s.w));
}

fn store4(i: u32, j: u32, v: vec4<f32>) {
  let m = p.a0;
  let n = p.a1;
  if (i >= m) { return; }
  if (j < n) { c[i * n + j] = canonbits(v.x); }
  if (j + 1u < n) { c[i * n + j + 1u] = canonbits(v.y); }
  if (j + 2u < n) { c[i * n + j + 2u] = canonbits(v.z); }
  if (j + 3u < n) { c[i * n + j + 3u] = canonbits(v.w); }
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let t = flatGroup(wid);
  if (t >= p.groups) { return; }
  let m = p.a0;
  let n = p.a1;
  let k = p.a2;
  let row0 = (t / p.a3) * 128u;
  let col0 = (t % p.a3) * 128u;
  let tx = lid.x;
  let ty = lid.y;
${ACCS.map((name) => `  var ${name} = vec4<f32>(p.zero);`).join("\n")}
  if (li == 0u) {
    for (var s = 0u; s < 4u; s++) { atomicStore(&minExp[s], 255u); }
  }
  // This invocation loads A's row arow, values ak0..ak0+${half - 1} of each chunk.
  let arow = li / 2u;
  let ak0 = (li % 2u) * ${half}u;
  let ai = row0 + arow;
  var slot = 0u;
  for (var p0 = 0u; p0 < k; p0 = p0 + ${depth}u) {
    workgroupBarrier();
    var ea = 255u;
    var eb = 255u;
    for (var e = 0u; e < ${half}u; e++) {
      let ak = p0 + ak0 + e;
      var av = 0.0f;
      if (ai < m && ak < k) { av = ftz(a[ai * k + ak]); }
      As[(ak0 + e) * 32u + arow / 4u][arow % 4u] = av;
      ea = min(ea, expOf(av));
      let idx = li + 256u * e;
      let bk = p0 + idx / 128u;
      let bj = col0 + idx % 128u;
      var bv = 0.0f;
      if (bk < k && bj < n) { bv = ftz(b[bk * n + bj]); }
      Bs[idx / 4u][idx % 4u] = bv;
      eb = min(eb, expOf(bv));
    }
    atomicMin(&minExp[2u * slot], ea);
    atomicMin(&minExp[2u * slot + 1u], eb);
    workgroupBarrier();
    let depth = min(${depth}u, k - p0);
    let fast = depth == ${depth}u &&
      atomicLoad(&minExp[2u * slot]) + atomicLoad(&minExp[2u * slot + 1u]) >= 152u;
    if (li == 0u) {
      atomicStore(&minExp[2u * (1u - slot)], 255u);
      atomicStore(&minExp[3u - 2u * slot], 255u);
    }
    if (fast) {
      for (var q = 0u; q < ${depth}u; q++) {
        let xa0 = As[q * 32u + ty];
        let xa1 = As[q * 32u + 16u + ty];
        let yb0 = Bs[q * 32u + tx];
        let yb1 = Bs[q * 32u + 16u + tx];
${fastStep()}
      }
    } else {
      for (var q = 0u; q < depth; q++) {
        let xa0 = As[q * 32u + ty];
        let xa1 = As[q * 32u + 16u + ty];
        let yb0 = Bs[q * 32u + tx];
        let yb1 = Bs[q * 32u + 16u + tx];
${slowStep()}
      }
    }
    slot = 1u - slot;
  }
${stores()}
}`;
}

export const GEMM_WGSL = gemmWgsl();
