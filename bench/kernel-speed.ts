// How fast each kernel of the CPU model runs on this machine, in nanoseconds per work unit
// (KernelSpec.work), at large sizes; and the device.maxKernelWork that makes the slowest
// kernel's largest legal launch last about one second. The kernels run as the device thread
// runs them (KernelSpec.run on VramBuffers), without the backend around them. The default in
// packages/common/src/config/schema.ts and docs/configuration.md rests on this figure.
// BENCH_BEFORE=DIR (another checkout, built) also times DIR's kernels on the same cases and
// reports each case's speed-up (`{case}_over_before`: DIR's seconds per launch over this
// build's).
import path from "node:path";
import { pathToFileURL } from "node:url";
import { KERNELS, type KernelSpec, VramBuffer } from "@vgpu-ha/gpu-model";
import { type Metric, publish } from "./report.js";
import { timeReps } from "./timing.js";

const MiB = 2 ** 20;
/** Elements of the element-wise kernels' buffers: 128 MiB each, far past the caches. */
const ELEMENTS = 2 ** 25;
const GEMM = { m: 512, n: 512, k: 512 } as const;
const STENCIL = { width: 2048, height: 2048, iterations: 16 } as const;
const HISTOGRAM_BINS = 256;
/** Many bins, input spread over all of them: every count a cache miss (the adversarial case). */
const HISTOGRAM_WIDE_BINS = 2 ** 24;
/** A gemm whose operands outgrow the caches (work 2^28). */
const GEMM_LARGE = { m: 1024, n: 1024, k: 256 } as const;
/**
 * Timed runs per kernel. The fastest is reported: on shared cores the others' load only ever
 * adds time, and the default should rest on what the model costs, not on the neighbours.
 */
const ROUNDS = 3;
/** What the default aims at: the slowest kernel's largest legal launch lasts about this. */
const TARGET_LAUNCH_SECONDS = 1;
/** device.maxBoBytes's default: it bounds the element-wise kernels' work whatever the limit. */
const MAX_BO_BYTES = 1024 * MiB;
const CURRENT_DEFAULT_WORK = 2 ** 31;

type Args = Parameters<KernelSpec["run"]>[0];

interface Case {
  /** The kernel's name, with the variant when a kernel is timed at two shapes. */
  readonly label: string;
  readonly kernel: string;
  readonly shape: string;
  readonly args: Args;
  /**
   * Elements of the input when maxBoBytes, not maxKernelWork, bounds the largest launch (the
   * element-wise kernels); undefined when only maxKernelWork does (gemm, stencil).
   */
  readonly elements?: number;
}

let nextId = 1;
function bo(bytes: number, fill?: (f32: Float32Array, u32: Uint32Array) => void): VramBuffer {
  const buffer = new VramBuffer(nextId++, bytes);
  fill?.(buffer.f32, buffer.u32);
  return buffer;
}

function ramp(f32: Float32Array): void {
  for (let i = 0; i < f32.length; i++) f32[i] = (i % 1000) * 0.001;
}

/** Values near 1e-20: every product of two is subnormal, so gemm flushes at each step (its
 * slowest data: x86 takes a microcode assist on each subnormal result). */
function tinyRamp(f32: Float32Array): void {
  for (let i = 0; i < f32.length; i++) f32[i] = ((i % 1000) + 1) * 1e-23;
}

function counting(_f32: Float32Array, u32: Uint32Array): void {
  for (let i = 0; i < u32.length; i++) u32[i] = Math.imul(i, 2654435761) >>> 0;
}

/** Element-wise kernels read and write 1 GiB buffers at most: 2^28 elements. */
const ELEMENTWISE_CAP = MAX_BO_BYTES / 4;

function cases(): Case[] {
  const bytes = ELEMENTS * 4;
  const x = bo(bytes, ramp);
  const y = bo(bytes, ramp);
  const dst = bo(bytes);
  const words = bo(bytes, counting);
  const one = bo(4096);
  const n = ELEMENTS;
  const { m, n: gn, k } = GEMM;
  const c = bo(m * gn * 4);
  const a = bo(m * k * 4, ramp);
  const b = bo(k * gn * 4, ramp);
  const large = GEMM_LARGE;
  const cLarge = bo(large.m * large.n * 4);
  const aLarge = bo(large.m * large.k * 4, ramp);
  const bLarge = bo(large.k * large.n * 4, ramp);
  const aTiny = bo(m * k * 4, tinyRamp);
  const bTiny = bo(k * gn * 4, tinyRamp);
  const wideBins = bo(HISTOGRAM_WIDE_BINS * 4);
  const { width, height, iterations } = STENCIL;
  const grid = bo(width * height * 4, ramp);
  const out = bo(width * height * 4);
  const elementwise = `n=2^${Math.log2(n)}`;
  return [
    {
      label: "fill",
      kernel: "fill",
      shape: elementwise,
      args: [dst, n, 7],
      elements: n,
    },
    {
      label: "copy",
      kernel: "copy",
      shape: elementwise,
      args: [dst, x, n],
      elements: n,
    },
    {
      label: "add_u32",
      kernel: "add_u32",
      shape: elementwise,
      args: [dst, words, x, n],
      elements: n,
    },
    {
      label: "increment_u32",
      kernel: "increment_u32",
      shape: elementwise,
      args: [words, n, 3],
      elements: n,
    },
    {
      label: "saxpy_f32",
      kernel: "saxpy_f32",
      shape: elementwise,
      args: [y, x, n, 0.5],
      elements: n,
    },
    {
      label: "reduce_sum_f32",
      kernel: "reduce_sum_f32",
      shape: elementwise,
      args: [one, x, n],
      elements: n,
    },
    {
      label: "histogram_u32",
      kernel: "histogram_u32",
      shape: `${elementwise} bins=${HISTOGRAM_BINS}`,
      args: [one, words, n, HISTOGRAM_BINS],
      elements: n,
    },
    {
      label: "histogram_u32_wide",
      kernel: "histogram_u32",
      shape: `${elementwise} bins=2^${Math.log2(HISTOGRAM_WIDE_BINS)}`,
      args: [wideBins, words, n, HISTOGRAM_WIDE_BINS],
      elements: n,
    },
    {
      label: "gemm_f32_large",
      kernel: "gemm_f32",
      shape: `m=${large.m} n=${large.n} k=${large.k}`,
      args: [cLarge, aLarge, bLarge, large.m, large.n, large.k],
    },
    {
      label: "gemm_f32",
      kernel: "gemm_f32",
      shape: `m=${m} n=${gn} k=${k}`,
      args: [c, a, b, m, gn, k],
    },
    {
      label: "gemm_f32_tiny",
      kernel: "gemm_f32",
      shape: `m=${m} n=${gn} k=${k}, products subnormal`,
      args: [c, aTiny, bTiny, m, gn, k],
    },
    {
      label: "stencil2d_f32",
      kernel: "stencil2d_f32",
      shape: `${width}x${height} x${iterations}`,
      args: [out, grid, width, height, iterations, 0.1],
    },
  ];
}

interface Speed {
  readonly label: string;
  readonly kernel: string;
  readonly shape: string;
  readonly work: number;
  readonly workCap: number;
  readonly nsPerUnit: number;
  readonly samplesNsPerUnit: number[];
}

/** The fastest of ROUNDS timed runs of `spec` on `args` after a warm-up, in ns per work unit. */
function time(spec: KernelSpec, args: Args): { nsPerUnit: number; samples: number[] } {
  const rejection = spec.validate(args);
  if (rejection !== null) throw new Error(`${spec.name}: ${rejection.message}`);
  const work = spec.work(args);
  spec.run(args); // warm-up: compiles the loop and touches every page
  const samples: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    samples.push((timeReps(1, () => spec.run(args)) * 1e9) / work);
  }
  return { nsPerUnit: Math.min(...samples), samples };
}

function measure(c: Case, kernels: ReadonlyMap<string, KernelSpec>): Speed {
  const spec = kernels.get(c.kernel);
  if (spec === undefined) throw new Error(`no kernel ${c.kernel}`);
  const work = spec.work(c.args);
  const { nsPerUnit, samples } = time(spec, c.args);
  const { label, kernel, shape, elements } = c;
  // With n at the largest a 1 GiB buffer holds, work scales with n (histogram's bins aside).
  const workCap =
    elements === undefined ? Number.POSITIVE_INFINITY : work * (ELEMENTWISE_CAP / elements);
  return { label, kernel, shape, work, workCap, nsPerUnit, samplesNsPerUnit: samples };
}

/** The kernels of the build in BENCH_BEFORE, if set. */
async function kernelsBefore(): Promise<ReadonlyMap<string, KernelSpec> | undefined> {
  const root = process.env.BENCH_BEFORE;
  if (!root) return undefined;
  const url = pathToFileURL(path.resolve(root, "packages/gpu-model/dist/index.js")).href;
  return ((await import(url)) as { KERNELS: ReadonlyMap<string, KernelSpec> }).KERNELS;
}

/** Seconds the largest legal launch of a kernel takes under a limit of `limitWork`. */
function largestLaunchSeconds(speed: Speed, limitWork: number): number {
  return (Math.min(limitWork, speed.workCap) * speed.nsPerUnit) / 1e9;
}

/** The power of two nearest (in ratio) to the work the slowest kernel does in the target time. */
function recommendedLimit(slowestNsPerUnit: number): number {
  const exact = (TARGET_LAUNCH_SECONDS * 1e9) / slowestNsPerUnit;
  return 2 ** Math.round(Math.log2(exact));
}

export async function runKernelSpeed(): Promise<void> {
  const before = await kernelsBefore();
  const pairs = cases().map((c) => ({
    now: measure(c, KERNELS),
    before: before === undefined ? undefined : measure(c, before),
  }));
  const speeds = pairs.map((p) => p.now);
  // Seconds per launch (work units may differ between the builds): before over now.
  const ratios: Record<string, number> = {};
  for (const { now, before: then } of pairs) {
    if (then !== undefined) {
      ratios[`${now.label}_over_before`] =
        (then.nsPerUnit * then.work) / (now.nsPerUnit * now.work);
    }
  }
  // The slowest kernel whose largest launch the limit bounds (an uncapped one, or one whose
  // cap is above the limit): its ns per unit decides.
  const slowest = speeds.reduce((worst, s) => (s.nsPerUnit > worst.nsPerUnit ? s : worst));
  const limit = recommendedLimit(slowest.nsPerUnit);
  const metrics: Metric[] = speeds.flatMap((s) => [
    { name: `${s.label}_ns_per_unit`, value: s.nsPerUnit, unit: "ns" },
    {
      name: `${s.label}_largest_launch_s`,
      value: largestLaunchSeconds(s, limit),
      unit: "s",
      target: {
        kind: "atMost",
        value: 2 * TARGET_LAUNCH_SECONDS,
        note: "at the recommended limit",
      },
    },
  ]);
  metrics.push(
    { name: "slowest_ns_per_unit", value: slowest.nsPerUnit, unit: "ns" },
    { name: "recommended_max_kernel_work", value: limit, unit: "work units" },
    {
      name: "largest_launch_s_at_2^31",
      value: largestLaunchSeconds(slowest, CURRENT_DEFAULT_WORK),
      unit: "s",
    },
  );
  publish({
    name: "kernel-speed",
    metrics,
    notes: [
      `each kernel run ${ROUNDS} times after a warm-up; the fastest run's ns per work unit`,
      `slowest: ${slowest.kernel} (${slowest.shape})`,
      `recommended device.maxKernelWork: 2^${Math.log2(limit)} = ${limit}, the power of two nearest ${TARGET_LAUNCH_SECONDS} s of the slowest kernel`,
      "element-wise kernels are also bounded by device.maxBoBytes (1 GiB: 2^28 elements)",
      "shared cores: other processes' load inflates the figures; run on a quiet machine",
      `before: ${process.env.BENCH_BEFORE ?? "unset"} (BENCH_BEFORE=DIR times DIR's kernels on the same cases; ratios: its seconds per launch over this build's)`,
    ],
    ratios,
    data: {
      speeds,
      before: pairs.map((p) => p.before),
      targetLaunchSeconds: TARGET_LAUNCH_SECONDS,
    },
  });
}
