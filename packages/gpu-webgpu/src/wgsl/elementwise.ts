// The element-wise kernels in WGSL (contract v2): one invocation per element, 256 per
// workgroup. Integer kernels keep every bit; saxpy flushes its operands and results and stores
// through canonbits. Binding 0 is the parameter block (prelude.ts); the buffers follow in slot
// order. An input that is also the output arrives as a copy (the executor stages it), so no
// buffer is bound twice with write access.

/** The body every element-wise kernel shares: `i` is the element, `n` its count. */
function elementwise(bindings: string, n: string, body: string): string {
  return `${bindings}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let g = flatGroup(wid);
  if (g >= p.groups) { return; }
  let i = g * 256u + li;
  if (i >= ${n}) { return; }
${body}
}`;
}

/** fill(dst, n, value). */
export const FILL_WGSL = elementwise(
  "@group(0) @binding(1) var<storage, read_write> dst: array<u32>;",
  "p.a0",
  "  dst[i] = p.a1;",
);

/** copy(dst, src, n): bits. */
export const COPY_WGSL = elementwise(
  `@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read> src: array<u32>;`,
  "p.a0",
  "  dst[i] = src[i];",
);

/** add_u32(dst, a, b, n): wrapping. */
export const ADD_U32_WGSL = elementwise(
  `@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read> a: array<u32>;
@group(0) @binding(3) var<storage, read> b: array<u32>;`,
  "p.a0",
  "  dst[i] = a[i] + b[i];",
);

/** increment_u32(buf, n, delta): wrapping. */
export const INCREMENT_U32_WGSL = elementwise(
  "@group(0) @binding(1) var<storage, read_write> buf: array<u32>;",
  "p.a0",
  "  buf[i] = buf[i] + p.a1;",
);

/** saxpy_f32(y, x, n, a): y = ftz(fmul(a, x) + y), a no-FMA form, canonical NaN. */
export const SAXPY_F32_WGSL = elementwise(
  `@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;`,
  "p.a0",
  `  let a = ftz(bitcast<f32>(p.a1));
  let prod = fmul(a, ftz(x[i]));
  y[i] = canonbits(ftz(prod * p.one + ftz(bitcast<f32>(y[i]))));`,
);

/** histogram_u32, first dispatch: clear hist[0..bins). */
export const HISTOGRAM_CLEAR_WGSL = elementwise(
  "@group(0) @binding(1) var<storage, read_write> hist: array<u32>;",
  "p.a1",
  "  hist[i] = 0u;",
);

/** histogram_u32, second dispatch: hist[in[i] % bins] += 1 (integer atomics: any order, same sums). */
export const HISTOGRAM_COUNT_WGSL = elementwise(
  `@group(0) @binding(1) var<storage, read_write> hist: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read> input: array<u32>;`,
  "p.a0",
  "  atomicAdd(&hist[input[i] % p.a1], 1u);",
);
