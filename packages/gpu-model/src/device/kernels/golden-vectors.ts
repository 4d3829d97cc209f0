// Golden vectors: fixed launches of every kernel on inputs chosen to show each rule of the
// kernel contract (subnormal operands and results of each sign, ±0, ±inf, NaN payloads, tiny
// products, cancellation, odd sizes, every size where reduce_sum_f32's tree changes shape).
// Another backend (WebGPU) runs the same cases at start and compares its output hashes with
// modelGoldenHashes(); a difference names the case and its kernel. The inputs are generated
// from fixed seeds, so they are the same on every node and in every version of this file
// unless it is changed on purpose (golden-vectors.test.ts pins the hashes).
import { createHash } from "node:crypto";
import { KERNELS } from "./index.js";
import type { KernelBuffer, ResolvedArg } from "./types.js";

/** An argument of a golden launch: a buffer of the case (by index) or a scalar. */
export type GoldenArg =
  | { readonly kind: "buffer"; readonly buffer: number }
  | { readonly kind: "u32" | "f32"; readonly value: number };

export interface GoldenCase {
  /** Unique, "<kernel>/<what it shows>". */
  readonly name: string;
  readonly kernel: string;
  /** Each buffer's contents before the launch, as 32-bit words; a buffer is exactly this long. */
  readonly buffers: readonly Uint32Array[];
  /** One per slot of the kernel, in slot order; two slots may name the same buffer. */
  readonly args: readonly GoldenArg[];
}

export interface GoldenHash {
  readonly name: string;
  readonly kernel: string;
  /** goldenOutputHash of the case's buffers after the launch. */
  readonly hash: string;
}

/**
 * The hash of a case's buffers after the launch, as every backend computes it: SHA-256 over,
 * per buffer in order, its length in words (u32, little-endian), then its words
 * (little-endian). Hex.
 */
export function goldenOutputHash(buffers: readonly Uint32Array[]): string {
  const hash = createHash("sha256");
  const length = new Uint32Array(1);
  for (const words of buffers) {
    length[0] = words.length;
    hash.update(new Uint8Array(length.buffer));
    hash.update(new Uint8Array(words.buffer, words.byteOffset, words.byteLength));
  }
  return hash.digest("hex");
}

/** The buffers of `c` after the launch on the CPU model (fresh copies; `c` is not changed). */
export function runGoldenCaseOnModel(c: GoldenCase): Uint32Array[] {
  const kernel = KERNELS.get(c.kernel);
  if (kernel === undefined) throw new Error(`golden case ${c.name}: no kernel ${c.kernel}`);
  const buffers = c.buffers.map((words, id) => kernelBuffer(id, words));
  const args: ResolvedArg[] = c.args.map((arg) =>
    arg.kind === "buffer" ? buffers[arg.buffer]! : arg.value,
  );
  const rejection = kernel.validate(args);
  if (rejection !== null) throw new Error(`golden case ${c.name}: ${rejection.message}`);
  kernel.run(args);
  return buffers.map((b) => b.u32);
}

/** Each golden case's output hash on the CPU model, computed now. */
export function modelGoldenHashes(): GoldenHash[] {
  return goldenVectors().map((c) => ({
    name: c.name,
    kernel: c.kernel,
    hash: goldenOutputHash(runGoldenCaseOnModel(c)),
  }));
}

function kernelBuffer(id: number, words: Uint32Array): KernelBuffer {
  const u32 = words.slice();
  const { buffer } = u32;
  return {
    id,
    byteLength: u32.byteLength,
    bytes: new Uint8Array(buffer),
    u32,
    i32: new Int32Array(buffer),
    f32: new Float32Array(buffer),
  };
}

// ---- The inputs ----

/** Bit patterns that show the float rules: signed zeros and subnormals, the smallest normals,
 * infinities, NaNs with payloads, ordinary values, and values near 2^-63 whose products lie
 * around 2^-126. */
// biome-ignore format: one kind of value per line
const SPECIAL_BITS = [
  0x00000000, 0x80000000, // ±0
  0x00000001, 0x80000001, 0x007fffff, 0x807fffff, 0x00400000, // subnormals of each sign
  0x00800000, 0x80800000, 0x00c00000, 0x80a00000, // smallest normals
  0x7f800000, 0xff800000, // ±inf
  0x7fc00000, 0x7fc00123, 0xffc00001, 0x7f800001, 0xffbfffff, // NaNs: quiet, payloads, signalling
  0x3f800000, 0xbf800000, 0x40490fdb, 0x33800000, 0x7f7fffff, 0xff7fffff, // ordinary, largest
  0x1f800000, 0x9f800000, 0x1fb504f3, 0x20000000, 0x1f000000, // 2^-64 .. 2^-63: tiny products
];

/** A seeded xorshift32 stream of words. */
function stream(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
}

/** `count` words of float32 data: ordinary values of many magnitudes, one in `specialEvery`
 * a special pattern. */
function mixed(count: number, seed: number, specialEvery = 11): Uint32Array {
  const next = stream(seed);
  const words = new Uint32Array(count);
  const values = new Float32Array(words.buffer);
  for (let i = 0; i < count; i++) {
    const r = next();
    if (r % specialEvery === 0) words[i] = SPECIAL_BITS[(r >>> 8) % SPECIAL_BITS.length]!;
    else values[i] = ((r >>> 8) / 2 ** 24 - 0.5) * 2 ** ((r & 31) - 12);
  }
  return words;
}

/** `count` words of float32 values with biased exponents in [low, high], either sign. */
function exponents(count: number, seed: number, low: number, high: number): Uint32Array {
  const next = stream(seed);
  const words = new Uint32Array(count);
  for (let i = 0; i < count; i++) {
    const r = next();
    const e = low + (r % (high - low + 1));
    words[i] = ((r & 0x80000000) | (e << 23) | ((r >>> 7) & 0x7fffff)) >>> 0;
  }
  return words;
}

/** `count` raw words. */
function words(count: number, seed: number): Uint32Array {
  const next = stream(seed);
  return Uint32Array.from({ length: count }, next);
}

/** Every ordered pair (s, t) of SPECIAL_BITS: x gets s, y gets t. */
function specialPairs(): { x: Uint32Array; y: Uint32Array } {
  const count = SPECIAL_BITS.length ** 2;
  const x = new Uint32Array(count);
  const y = new Uint32Array(count);
  SPECIAL_BITS.forEach((s, i) => {
    SPECIAL_BITS.forEach((t, j) => {
      x[i * SPECIAL_BITS.length + j] = s;
      y[i * SPECIAL_BITS.length + j] = t;
    });
  });
  return { x, y };
}

const buf = (buffer: number): GoldenArg => ({ kind: "buffer", buffer });
const u32 = (value: number): GoldenArg => ({ kind: "u32", value });
const f32 = (value: number): GoldenArg => ({ kind: "f32", value: Math.fround(value) });

function integerCases(): GoldenCase[] {
  return [
    {
      name: "fill/odd-count",
      kernel: "fill",
      buffers: [words(1031, 1)],
      args: [buf(0), u32(1029), u32(0x7fa00001)],
    },
    {
      name: "copy/bits-kept",
      kernel: "copy",
      buffers: [words(1000, 2), mixed(1000, 3, 2)],
      args: [buf(0), buf(1), u32(999)],
    },
    {
      name: "add_u32/wrap",
      kernel: "add_u32",
      buffers: [new Uint32Array(1001), words(1001, 4), words(1001, 5)],
      args: [buf(0), buf(1), buf(2), u32(1001)],
    },
    {
      name: "increment_u32/wrap",
      kernel: "increment_u32",
      buffers: [words(777, 6)],
      args: [buf(0), u32(777), u32(0xfffffffe)],
    },
    {
      name: "histogram_u32/odd-bins",
      kernel: "histogram_u32",
      buffers: [words(40, 7), words(3001, 8)],
      args: [buf(0), buf(1), u32(3001), u32(37)],
    },
  ];
}

function saxpyCases(): GoldenCase[] {
  const { x, y } = specialPairs();
  const scalars: [string, number][] = [
    ["a=0.5", 0.5],
    ["a=-0", -0],
    ["a=subnormal", 2 ** -149],
    ["a=-subnormal", -(2 ** -130)],
    ["a=2^-64", 2 ** -64],
    ["a=NaN", Number.NaN],
    ["a=-inf", Number.NEGATIVE_INFINITY],
  ];
  const cases: GoldenCase[] = scalars.map(([what, a]) => ({
    name: `saxpy_f32/special-pairs-${what}`,
    kernel: "saxpy_f32",
    buffers: [y, x],
    args: [buf(0), buf(1), u32(x.length), f32(a)],
  }));
  cases.push(
    {
      name: "saxpy_f32/mixed-odd-n",
      kernel: "saxpy_f32",
      buffers: [mixed(1003, 9), mixed(1003, 10)],
      args: [buf(0), buf(1), u32(1001), f32(-1.5)],
    },
    {
      name: "saxpy_f32/y-is-x",
      kernel: "saxpy_f32",
      buffers: [mixed(513, 11, 3)],
      args: [buf(0), buf(0), u32(513), f32(0.75)],
    },
  );
  return cases;
}

function gemmCase(name: string, m: number, n: number, k: number, a: Uint32Array, b: Uint32Array) {
  return {
    name: `gemm_f32/${name}`,
    kernel: "gemm_f32",
    buffers: [words(m * n, m * 7919 + n), a, b],
    args: [buf(0), buf(1), buf(2), u32(m), u32(n), u32(k)],
  };
}

function gemmCases(): GoldenCase[] {
  return [
    gemmCase("1x1x1", 1, 1, 1, Uint32Array.of(0x40400000), Uint32Array.of(0xbfc00000)),
    gemmCase("k=0", 3, 5, 0, new Uint32Array(0), new Uint32Array(0)),
    gemmCase("mixed-5x7x9", 5, 7, 9, mixed(45, 12, 3), mixed(63, 13, 3)),
    gemmCase("mixed-17x19x33", 17, 19, 33, mixed(17 * 33, 14), mixed(33 * 19, 15)),
    gemmCase("ordinary-64x64x64", 64, 64, 64, mixed(4096, 16, 1e9), mixed(4096, 17, 1e9)),
    gemmCase("ordinary-13x35x300", 13, 35, 300, mixed(3900, 18, 1e9), mixed(10500, 19, 1e9)),
    // Values of 2^-64..2^-62: products around 2^-126, some subnormal (flushed), some not.
    gemmCase(
      "tiny-products-9x10x11",
      9,
      10,
      11,
      exponents(99, 20, 63, 65),
      exponents(110, 21, 63, 65),
    ),
    // Values near 2^-125: products of them with ~1 cancel in the sums into the subnormal range.
    gemmCase("cancel-8x8x16", 8, 8, 16, exponents(128, 22, 1, 3), exponents(128, 23, 126, 128)),
    // Products near 2^-102 (the CPU model's bound for its fast tiles), on both sides of it.
    gemmCase(
      "near-2^-102-12x12x12",
      12,
      12,
      12,
      exponents(144, 24, 75, 77),
      exponents(144, 25, 75, 77),
    ),
  ];
}

function reduceCase(name: string, input: Uint32Array, n = input.length): GoldenCase {
  return {
    name: `reduce_sum_f32/${name}`,
    kernel: "reduce_sum_f32",
    buffers: [Uint32Array.of(0xdeadbeef), input],
    args: [buf(0), buf(1), u32(n)],
  };
}

function reduceCases(): GoldenCase[] {
  const sizes = [1, 255, 256, 2047, 2048, 2049, 2048 * 2048 + 1];
  return [
    reduceCase("n=0", Uint32Array.of(0x3f800000), 0),
    ...sizes.map((n) => reduceCase(`mixed-n=${n}`, mixed(n, 100 + (n % 1000)))),
    reduceCase("negative-zeros", new Uint32Array(300).fill(0x80000000)),
    reduceCase(
      "subnormals",
      Uint32Array.from({ length: 700 }, (_, i) => (i % 2 ? 0x807fffff : 1)),
    ),
    // 2^-126 and -1.5·2^-126 meet in the tree: -0.5·2^-126 flushes to -0.
    reduceCase("cancel-to-subnormal", Uint32Array.of(0x00800000, 0x80c00000)),
    reduceCase("nan-payload", Uint32Array.of(0x3f800000, 0x7fc00123, 0x40000000)),
    reduceCase("inf-minus-inf", Uint32Array.of(0x7f800000, 0x3f800000, 0xff800000)),
    reduceCase(
      "tree-order",
      Uint32Array.from({ length: 2048 }, (_, i) => (i === 0 ? 0x3f800000 : 0x33800000)),
    ),
  ];
}

function stencilCase(
  name: string,
  width: number,
  height: number,
  iterations: number,
  alpha: number,
  src: Uint32Array,
): GoldenCase {
  return {
    name: `stencil2d_f32/${name}`,
    kernel: "stencil2d_f32",
    buffers: [words(width * height + 3, width * 31 + height), src],
    args: [buf(0), buf(1), u32(width), u32(height), u32(iterations), f32(alpha)],
  };
}

function stencilCases(): GoldenCase[] {
  return [
    stencilCase("1x1", 1, 1, 2, 0.25, Uint32Array.of(0x40400000)),
    stencilCase("copy-bits", 16, 16, 0, 0.25, mixed(256, 30, 2)),
    stencilCase("mixed-7x5", 7, 5, 3, 0.1, mixed(35, 31, 4)),
    stencilCase("ordinary-33x17", 33, 17, 5, 0.2, mixed(33 * 17, 32, 1e9)),
    stencilCase("tiny-9x9", 9, 9, 2, 0.25, exponents(81, 33, 1, 3)),
    stencilCase("alpha-subnormal", 6, 6, 1, 2 ** -140, mixed(36, 34, 1e9)),
  ];
}

/** Every golden case, generated now (the largest, reduce over 2048²+1 elements, is 16 MiB). */
export function goldenVectors(): GoldenCase[] {
  return [...integerCases(), ...saxpyCases(), ...gemmCases(), ...reduceCases(), ...stencilCases()];
}
