// Launches of every kernel for the GPU tests, beside gpu-model's golden vectors: seeded inputs
// (float specials, subnormals, tiny values whose products fall around 2^-126), odd sizes,
// reduce lengths around the tree's 2048-element block, aliasing, grids of more than 65535
// workgroups, page-sized buffers as the paravirtual layer makes them. Each case becomes device
// operations (alloc, write, launch, hash, free) that the tests run on the model and the GPU.
import { type DeviceOp, PAGE_SIZE_BYTES } from "@vgpu-ha/gpu-model";

export type CaseArg = { readonly buffer: number } | number;

export interface KernelCase {
  readonly kernel: string;
  readonly name: string;
  /** Initial contents of each buffer (its size is this rounded up to whole pages). */
  readonly buffers: readonly Uint8Array[];
  readonly args: readonly CaseArg[];
}

/** Float32 bit patterns a float kernel must treat exactly as the model does. */
export const F32_SPECIAL_BITS: readonly number[] = [
  0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x807fffff, 0x00400000, 0x00800000,
  0x80800000, 0x00800001, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001,
  0x7f800001, 0x3f800000, 0xbfc00000, 0x3f800001, 0x20000000, 0x1f800000, 0x1fffffff, 0x1f7fffff,
  0x3effffff, 0x4b800000, 0x33800000, 0x00000010,
];

/** A seeded 32-bit generator (mulberry32). */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

function words(values: ArrayLike<number>): Uint8Array {
  return new Uint8Array(Uint32Array.from(values).buffer);
}

/**
 * What mixedF32 draws besides values of a modest range: `specials` adds F32_SPECIAL_BITS (NaNs
 * and infinities among them); `finite` and `specials` add subnormals, ±0 and tiny values whose
 * products and sums fall below 2^-126; `finite` never draws a NaN or an infinity (one would
 * make most of a sum or a row of C a NaN and hide every other difference); `plain` adds nothing.
 */
export type F32Mix = "specials" | "finite" | "plain";

/** n float32 bit patterns, seeded. */
export function mixedF32(n: number, seed: number, mix: F32Mix = "specials"): Uint32Array {
  const next = seeded(seed);
  const out = new Uint32Array(n);
  const f = new Float32Array(out.buffer);
  for (let i = 0; i < n; i++) {
    const r = mix === "plain" ? 15 : next() % 16;
    if (mix === "specials" && r === 0) {
      out[i] = F32_SPECIAL_BITS[next() % F32_SPECIAL_BITS.length]!;
    } else if (r <= 1) {
      out[i] = (next() & 0x807fffff) >>> 0; // a subnormal or ±0
    } else if (r === 2) {
      f[i] = ((next() / 2 ** 32) * 2 - 1) * 2 ** -(60 + (next() % 10));
    } else {
      f[i] = ((next() / 2 ** 32) * 2 - 1) * 2 ** ((next() % 24) - 12);
    }
  }
  return out;
}

/** The first case of a kernel gets the specials, the others finite values. */
const mix = (i: number): F32Mix => (i === 0 ? "specials" : "finite");

/** Every pair of specials: x[i] = s[i / len], y[i] = s[i % len]. */
function specialPairs(): { x: Uint32Array; y: Uint32Array } {
  const s = F32_SPECIAL_BITS;
  const x = new Uint32Array(s.length * s.length);
  const y = new Uint32Array(s.length * s.length);
  for (let i = 0; i < x.length; i++) {
    x[i] = s[Math.floor(i / s.length)]!;
    y[i] = s[i % s.length]!;
  }
  return { x, y };
}

const bitsToF32 = (bits: number) => new Float32Array(Uint32Array.of(bits).buffer)[0]!;
/** Scalars of f32 slots: a subnormal, -0, a product across 2^-126, NaN, ∞ and plain ones. */
const F32_SCALARS = [
  1,
  -0.75,
  bitsToF32(0x00000003),
  -0,
  bitsToF32(0x20000000),
  Number.NaN,
  Number.POSITIVE_INFINITY,
  1e-30,
];

function saxpyCases(): KernelCase[] {
  const { x, y } = specialPairs();
  const cases = F32_SCALARS.map((a, i) => ({
    kernel: "saxpy_f32",
    name: `specials a#${i}`,
    buffers: [words(y), words(x)],
    args: [{ buffer: 0 }, { buffer: 1 }, x.length, Math.fround(a)],
  }));
  cases.push({
    kernel: "saxpy_f32",
    name: "mixed 4099, y aliases x",
    buffers: [words(mixedF32(4099, 7, "finite"))],
    args: [{ buffer: 0 }, { buffer: 0 }, 4099, 0.5],
  });
  return cases;
}

function gemmCases(): KernelCase[] {
  const shapes: [number, number, number][] = [
    [5, 7, 3],
    [64, 64, 64],
    [65, 67, 130],
    [3, 2, 0],
    [1, 300, 17],
    [130, 1, 5],
  ];
  const cases = shapes.map(([m, n, k], i) => gemmCase(m, n, k, 11 + i, mix(i)));
  // Random shapes across the 128×128 tile and the 16-deep chunks: plain values (every chunk
  // takes the fast path), finite ones (mostly the flushing path), and plain ones with a few
  // tiny values sprinkled in (both paths in one launch).
  const next = seeded(1717);
  for (let i = 0; i < 9; i++) {
    const [m, n, k] = [1 + (next() % 300), 1 + (next() % 300), next() % 100];
    const kind = (["plain", "finite", "sprinkled"] as const)[i % 3]!;
    cases.push(gemmCase(m, n, k, 100 + i, kind));
  }
  cases.push(gemmCase(256, 256, 64, 120, "plain"), gemmCase(257, 384, 48, 121, "sprinkled"));
  return cases;
}

/** A gemm launch on seeded operands: a mix of mixedF32, or plain values with 1 in 61 tiny. */
function gemmCase(
  m: number,
  n: number,
  k: number,
  seed: number,
  kind: F32Mix | "sprinkled",
): KernelCase {
  const operand = (count: number, s: number) => {
    const values = mixedF32(count, s, kind === "sprinkled" ? "plain" : kind);
    if (kind === "sprinkled") {
      const f = new Float32Array(values.buffer);
      for (let i = s % 61; i < count; i += 61) f[i] = 2 ** -100 * (1 + (i % 7) / 8);
    }
    return words(values);
  };
  return {
    kernel: "gemm_f32",
    name: `${m}x${n}x${k}${kind === "specials" || kind === "finite" ? "" : ` ${kind}`}`,
    buffers: [
      new Uint8Array(Math.max(1, m * n) * 4),
      operand(m * k, seed),
      operand(k * n, seed + 7),
    ],
    args: [{ buffer: 0 }, { buffer: 1 }, { buffer: 2 }, m, n, k],
  };
}

function reduceCases(): KernelCase[] {
  const lengths = [0, 1, 2, 255, 2047, 2048, 2049, 4096 * 3 + 5, 2048 * 2048 + 1];
  const cases: KernelCase[] = lengths.map((n) => ({
    kernel: "reduce_sum_f32",
    name: `n=${n}`,
    buffers: [new Uint8Array(4), words(mixedF32(Math.max(n, 1), 31 + n, "finite"))],
    args: [{ buffer: 0 }, { buffer: 1 }, n],
  }));
  const { x } = specialPairs();
  cases.push({
    kernel: "reduce_sum_f32",
    name: "specials",
    buffers: [new Uint8Array(4), words(x)],
    args: [{ buffer: 0 }, { buffer: 1 }, x.length],
  });
  const tiny = new Uint32Array(5000).fill(0x00000001);
  cases.push({
    kernel: "reduce_sum_f32",
    name: "subnormals only",
    buffers: [new Uint8Array(4), words(tiny)],
    args: [{ buffer: 0 }, { buffer: 1 }, tiny.length],
  });
  return cases;
}

function stencilCases(): KernelCase[] {
  const grids: [number, number, number, number][] = [
    [17, 13, 0, 0.1],
    [17, 13, 1, 0.1],
    [17, 13, 3, 0.2],
    [1, 1, 2, 0.5],
    [40, 3, 5, bitsToF32(0x00000005)],
    [9, 9, 2, Number.NaN],
  ];
  return grids.map(([w, h, it, alpha], i) => ({
    kernel: "stencil2d_f32",
    name: `${w}x${h} it=${it} #${i}`,
    buffers: [new Uint8Array(w * h * 4), words(mixedF32(w * h, 41 + i, mix(i)))],
    args: [{ buffer: 0 }, { buffer: 1 }, w, h, it, Math.fround(alpha)],
  }));
}

function integerCases(): KernelCase[] {
  const next = seeded(5);
  const u = (n: number) => words(Array.from({ length: n }, () => next()));
  return [
    { kernel: "fill", name: "n=0", buffers: [u(8)], args: [{ buffer: 0 }, 0, 7] },
    { kernel: "fill", name: "n=1001", buffers: [u(1030)], args: [{ buffer: 0 }, 1001, 0xdeadbeef] },
    {
      kernel: "copy",
      name: "n=1500 specials",
      buffers: [u(1600), words(mixedF32(1600, 3))],
      args: [{ buffer: 0 }, { buffer: 1 }, 1500],
    },
    {
      kernel: "copy",
      name: "onto itself",
      buffers: [u(64)],
      args: [{ buffer: 0 }, { buffer: 0 }, 64],
    },
    {
      kernel: "add_u32",
      name: "wrapping",
      buffers: [u(700), u(700), u(700)],
      args: [{ buffer: 0 }, { buffer: 1 }, { buffer: 2 }, 699],
    },
    {
      kernel: "add_u32",
      name: "dst aliases a and b",
      buffers: [u(300)],
      args: [{ buffer: 0 }, { buffer: 0 }, { buffer: 0 }, 300],
    },
    {
      kernel: "add_u32",
      name: "dst aliases b",
      buffers: [u(300), u(300)],
      args: [{ buffer: 0 }, { buffer: 1 }, { buffer: 0 }, 257],
    },
    {
      // 65537 workgroups: more than one grid dimension holds (a 2-D grid).
      kernel: "increment_u32",
      name: "n=2^24+5",
      buffers: [u((1 << 24) + 5)],
      args: [{ buffer: 0 }, (1 << 24) + 5, 3],
    },
    {
      kernel: "increment_u32",
      name: "delta 2^32-1",
      buffers: [u(1025)],
      args: [{ buffer: 0 }, 1025, 0xffffffff],
    },
    {
      kernel: "histogram_u32",
      name: "37 bins",
      buffers: [u(40), u(5000)],
      args: [{ buffer: 0 }, { buffer: 1 }, 5000, 37],
    },
    {
      kernel: "histogram_u32",
      name: "1 bin, n=0",
      buffers: [u(4), u(4)],
      args: [{ buffer: 0 }, { buffer: 1 }, 0, 1],
    },
  ];
}

/** The fixed cases, every kernel of the library. */
export function kernelCases(): KernelCase[] {
  return [...integerCases(), ...saxpyCases(), ...gemmCases(), ...reduceCases(), ...stencilCases()];
}

/** The byte size of a case buffer on the device: whole pages. */
export function caseBufferBytes(contents: Uint8Array): number {
  return Math.max(1, Math.ceil(contents.byteLength / PAGE_SIZE_BYTES)) * PAGE_SIZE_BYTES;
}

/** A case as device operations: allocate and fill, launch, hash every buffer, free. */
export function kernelCaseOps(c: KernelCase, firstId: number): DeviceOp[] {
  const ids = c.buffers.map((_, i) => firstId + i);
  const ops: DeviceOp[] = [];
  c.buffers.forEach((data, i) => {
    ops.push({ k: "alloc", id: ids[i]!, size: caseBufferBytes(data) });
    ops.push({ k: "write", id: ids[i]!, offset: 0, data });
  });
  const args = c.args.map((a) => (typeof a === "number" ? a : { buffer: ids[a.buffer]! }));
  ops.push({ k: "launch", kernel: c.kernel, args });
  ops.push({ k: "hash", ids });
  for (const id of ids) ops.push({ k: "free", id });
  return ops;
}
