// The GPU benchmark (issue #17), on a host with a GPU: `npm run bench -- gpu` writes
// bench/results/gpu.json. Phases, each after the GPU has been kept busy for WARM_MS (the clock
// governor drops the SM clock within ~0.3 s of idle: docs/gpu.md):
//   isolated  every kernel on a WebGPU executor in this process (@vgpu-ha/gpu-webgpu, no vgpud):
//             wall time per launch over a batch of BATCH launches submitted together (one
//             command encoder), median of REPS batches; GB/s or GFLOP/s from it
//   vgpud     the same launches through a standalone webgpu vgpud, PIPELINE launches in flight
//   gemm2048  gemm_f32 2048³ through standalone, and webgpu → webgpu pairs in async and sync
//             mode: iterations/s (PIPELINE in flight), ratios to standalone, in rotating rounds
//   small     a small call's round trip (increment_u32 of one word, one at a time): p50/p99 µs,
//             standalone and the sync pair
//   failover  bench/failover.ts's kill/pause/switchover rounds on a webgpu → webgpu sync pair
// VGPUHA_TEST_GPUS=2 puts each pair's nodes on two GPUs (packages/daemon/src/process/gpu-placement.ts);
// BENCH_GPU_FAILOVER_ROUNDS (5). BENCH_GPU_GEMM_ONLY=1 runs the gemm2048 phase alone and writes
// no JSON (a diagnosis: it prints each round's rate and launch round trips), with
// BENCH_GPU_PIPELINE (launches in flight, 4), BENCH_GPU_MODES (the pairs, "async,sync") and
// BENCH_GPU_MEASURE_MS (each round's measured time, 2000); BENCH_GPU_SMALL_ONLY=1 runs the
// small-call phase alone (standalone and sync, BENCH_ROUNDS rounds, printed);
// with BENCH_PROFILE_DIR it also prints each node's CPU profile summary per round. With
// BENCH_SEQ_TRACE=DIR every process traces each launch's path (g.send / g.reply here, the
// nodes' stages in packages/common/src/seq-trace.ts); bench/seq-trace.ts says where each stall
// sat (bench/gpu-host-run.sh TRACE=1). The CUDA figures are the feasibility probe's on the same
// GPU model (docs/gpu.md), not measured by this run.
import { performance } from "node:perf_hooks";
import { buf, f32, u32 } from "@vgpu-ha/client";
import { type KernelArg, traceSeq } from "@vgpu-ha/common";
import { gpuWrap, spawnVgpud } from "@vgpu-ha/daemon";
import type { DeviceExecutor, DeviceOp, OpResult } from "@vgpu-ha/gpu-model";

type OpArg = Extract<DeviceOp, { k: "launch" }>["args"][number];

import { type Cluster, startPair, startStandalone } from "./cluster.js";
import { formatSummary, profilePhase, profileRoot, summarizeProfile } from "./cpu-profile.js";
import { runSetting, settingMetrics } from "./failover.js";
import { type Client, pipelined, withClients } from "./guest-workload.js";
import { type Metric, publish } from "./report.js";
import { inRounds, medianRatio, roundsFromEnv } from "./rounds.js";
import { median, percentile } from "./timing.js";

const WARM_MS = 500;
const BATCH = 20;
const REPS = 5;
const PIPELINE = envInt("BENCH_GPU_PIPELINE", 4);
const MODES = (process.env.BENCH_GPU_MODES ?? "async,sync")
  .split(",")
  .filter((m): m is "async" | "sync" => m === "async" || m === "sync");
const ROUNDS = roundsFromEnv(2);
const DURATIONS = { warmupMs: WARM_MS, measureMs: envInt("BENCH_GPU_MEASURE_MS", 2000) };
const LATENCY_MS = 2000;
const FAILOVER_ROUNDS = envInt("BENCH_GPU_FAILOVER_ROUNDS", 5);
/** A webgpu node of the benchmark: gemm 2048³ is 2^33 work units, above the CPU default. */
const DEVICE = { backend: "webgpu", maxKernelWork: 2 ** 36 };

function envInt(name: string, fallback: number): number {
  const v = Number(process.env[name] ?? "");
  return Number.isInteger(v) && v > 0 ? v : fallback;
}
// BENCH_GPU_N, BENCH_GPU_GRID, BENCH_GPU_GEMM and BENCH_WEBGPU_MODULE (a stand-in module, e.g.
// test/dist/support/fake-webgpu.js) are for a smoke test of this file on a host without a GPU,
// never for results.
const N = envInt("BENCH_GPU_N", 16 * 1024 * 1024);
const GRID = envInt("BENCH_GPU_GRID", 2048);
const GEMM = envInt("BENCH_GPU_GEMM", 2048);
const MODULE = process.env.BENCH_WEBGPU_MODULE;
const SIZE_LABEL = N % 2 ** 20 === 0 ? `${N / 2 ** 20}M` : String(N);
const ONE_F32 = 0x3f800000;

/** The probe's CUDA figures on an H100 80GB HBM3 (docs/gpu.md), for the same shapes. */
const CUDA_PROBE: Readonly<Record<string, string>> = {
  increment_u32: "2.8 TB/s (16M)",
  saxpy_f32: "2.9 TB/s (16M)",
  reduce_sum_f32: "2.2 TB/s (16M)",
  gemm_f32: "50 TFLOP/s (2048³, cuBLAS, no TF32)",
};

/** A benchmark case: its buffers (bytes), its launch, and what one launch moves or computes. */
interface KernelCase {
  readonly kernel: string;
  readonly shape: string;
  readonly buffers: readonly number[];
  /** Launch arguments: a buffer by its index in `buffers`, or a scalar. */
  readonly args: readonly (
    | { readonly buffer: number }
    | { readonly u32: number }
    | { readonly f32: number }
  )[];
  readonly bytes?: number;
  readonly flops?: number;
}

const B = (i: number) => ({ buffer: i });
const CASES: readonly KernelCase[] = [
  {
    kernel: "fill",
    shape: SIZE_LABEL,
    buffers: [4 * N],
    args: [B(0), { u32: N }, { u32: 7 }],
    bytes: 4 * N,
  },
  {
    kernel: "copy",
    shape: SIZE_LABEL,
    buffers: [4 * N, 4 * N],
    args: [B(0), B(1), { u32: N }],
    bytes: 8 * N,
  },
  {
    kernel: "add_u32",
    shape: SIZE_LABEL,
    buffers: [4 * N, 4 * N, 4 * N],
    args: [B(0), B(1), B(2), { u32: N }],
    bytes: 12 * N,
  },
  {
    kernel: "increment_u32",
    shape: SIZE_LABEL,
    buffers: [4 * N],
    args: [B(0), { u32: N }, { u32: 1 }],
    bytes: 8 * N,
  },
  {
    kernel: "saxpy_f32",
    shape: SIZE_LABEL,
    buffers: [4 * N, 4 * N],
    args: [B(0), B(1), { u32: N }, { f32: 0.5 }],
    bytes: 12 * N,
    flops: 2 * N,
  },
  {
    kernel: "reduce_sum_f32",
    shape: SIZE_LABEL,
    buffers: [4096, 4 * N],
    args: [B(0), B(1), { u32: N }],
    bytes: 4 * N,
    flops: N,
  },
  {
    kernel: "stencil2d_f32",
    shape: `${GRID}² ×1`,
    buffers: [4 * GRID * GRID, 4 * GRID * GRID],
    args: [B(0), B(1), { u32: GRID }, { u32: GRID }, { u32: 1 }, { f32: 0.1 }],
    bytes: 8 * GRID * GRID,
    flops: 7 * GRID * GRID,
  },
  {
    kernel: "histogram_u32",
    shape: `${SIZE_LABEL}, 256 bins`,
    buffers: [4 * 256, 4 * N],
    args: [B(0), B(1), { u32: N }, { u32: 256 }],
    bytes: 4 * N,
  },
  {
    kernel: "gemm_f32",
    shape: `${GEMM}³`,
    buffers: [4 * GEMM * GEMM, 4 * GEMM * GEMM, 4 * GEMM * GEMM],
    args: [B(0), B(1), B(2), { u32: GEMM }, { u32: GEMM }, { u32: GEMM }],
    bytes: 12 * GEMM * GEMM,
    flops: 2 * GEMM ** 3,
  },
];

// ---- isolated: the executor in this process ----

interface GpuModule {
  createWebGpuExecutor(
    o: object,
  ): Promise<{ executor: DeviceExecutor; adapter: Record<string, unknown> }>;
  ExecutorDriver: new (executor: DeviceExecutor) => Ops;
}

/** gpu-webgpu's ExecutorDriver: runs ops on an executor and resolves their results. */
interface Ops {
  run(ops: readonly DeviceOp[]): Promise<OpResult[]>;
}

/** A case's buffers on the executor (ids from `firstId`), filled with 1.0f bits. */
async function allocCase(ops: Ops, c: KernelCase, firstId: number): Promise<DeviceOp> {
  const ids = c.buffers.map((_, i) => firstId + i);
  await ops.run(c.buffers.map((size, i) => ({ k: "alloc", id: ids[i]!, size }) as DeviceOp));
  await ops.run(
    c.buffers.map(
      (size, i) =>
        ({
          k: "launch",
          kernel: "fill",
          args: [{ buffer: ids[i]! }, size / 4, ONE_F32],
        }) as DeviceOp,
    ),
  );
  const args: OpArg[] = c.args.map((a) =>
    "buffer" in a ? { buffer: ids[a.buffer]! } : "u32" in a ? a.u32 : Math.fround(a.f32),
  );
  return { k: "launch", kernel: c.kernel, args };
}

/** Keeps the GPU busy for `ms` with `launch` (the clock governor: docs/gpu.md). */
async function warm(run: () => Promise<unknown>, ms = WARM_MS): Promise<void> {
  const end = performance.now() + ms;
  while (performance.now() < end) await run();
}

async function measureIsolated(gpu: GpuModule) {
  // Dawn's own polling (every loop turn): the kernels' best case, as in earlier runs.
  const { executor, adapter } = await gpu.createWebGpuExecutor({ eventIntervalUs: 0 });
  const ops = new gpu.ExecutorDriver(executor);
  const perKernelMs: Record<string, number> = {};
  try {
    let nextId = 1;
    const launches = new Map<string, DeviceOp>();
    for (const c of CASES) {
      launches.set(c.kernel, await allocCase(ops, c, nextId));
      nextId += c.buffers.length;
    }
    await warm(() => ops.run([launches.get("gemm_f32")!]));
    for (const c of CASES) {
      const launch = launches.get(c.kernel)!;
      await ops.run([launch]);
      const samples: number[] = [];
      for (let r = 0; r < REPS; r++) {
        const t = performance.now();
        await ops.run(Array.from({ length: BATCH }, () => launch));
        samples.push((performance.now() - t) / BATCH);
      }
      perKernelMs[c.kernel] = median(samples);
      console.log(`  isolated ${c.kernel} ${c.shape}: ${perKernelMs[c.kernel]!.toFixed(3)} ms`);
    }
  } finally {
    executor.close();
  }
  return { adapter, perKernelMs };
}

// ---- through vgpud ----

function kernelArgs(c: KernelCase, bos: readonly number[]): KernelArg[] {
  return c.args.map((a) =>
    "buffer" in a ? buf(bos[a.buffer]!) : "u32" in a ? u32(a.u32) : f32(a.f32),
  );
}

/** A case's buffers in a guest's context, filled with 1.0f bits by the fill kernel. */
async function guestCase(c: Client, k: KernelCase): Promise<KernelArg[]> {
  const bos: number[] = [];
  for (const size of k.buffers) {
    const bo = await c.session.allocBo(c.context, size);
    await c.session.launch(c.context, "fill", [buf(bo), u32(size / 4), u32(ONE_F32)]);
    bos.push(bo);
  }
  return kernelArgs(k, bos);
}

async function measureVgpud(cluster: Cluster) {
  const perKernelMs: Record<string, number> = {};
  await withClients(cluster.primary.guest, 1, async ([c]) => {
    for (const k of CASES) {
      const args = await guestCase(c!, k);
      const r = await pipelined(cluster.nodes, [c!], PIPELINE, DURATIONS, () =>
        c!.session.launch(c!.context, k.kernel, args),
      );
      perKernelMs[k.kernel] = 1000 / r.perSecond;
      console.log(`  vgpud ${k.kernel} ${k.shape}: ${perKernelMs[k.kernel]!.toFixed(3)} ms`);
      for (const a of args) if (a.kind === "buffer") await c!.session.freeBo(c!.context, a.bo);
    }
  });
  return perKernelMs;
}

const GEMM_CASE = CASES.find((c) => c.kernel === "gemm_f32")!;

/** The gemm2048 set-ups, by their number in the trace's round rows (bench/seq-trace.ts). */
const GEMM_SETUPS = ["standalone", "async", "sync"];
let launchesTraced = 0;

/**
 * gemm 2048³ launches, PIPELINE in flight: the rate, and each launch's round trip (ms). With
 * BENCH_SEQ_TRACE each launch's send and reply are traced (g.send / g.reply: its number, ms).
 */
function gemmRate(cluster: Cluster, durations = DURATIONS) {
  return withClients(cluster.primary.guest, 1, async ([c]) => {
    const args = await guestCase(c!, GEMM_CASE);
    const trips: number[] = [];
    const r = await pipelined(cluster.nodes, [c!], PIPELINE, durations, async () => {
      const n = ++launchesTraced;
      traceSeq("g.send", n);
      const t = performance.now();
      await c!.session.launch(c!.context, "gemm_f32", args);
      const ms = performance.now() - t;
      traceSeq("g.reply", n, ms);
      trips.push(ms);
    });
    return { ...r, tripP50Ms: percentile(trips, 50), tripP99Ms: percentile(trips, 99) };
  });
}

/** Starts a standalone node and a webgpu → webgpu pair per mode into `clusters`, placed. */
async function startSetups(
  clusters: Map<string, Cluster>,
  modes: readonly ("async" | "sync")[],
): Promise<void> {
  clusters.set(
    "standalone",
    await startStandalone("gpu-standalone", { device: DEVICE, spawn: placed(0) }),
  );
  for (const mode of modes) {
    clusters.set(
      mode,
      await startPair({ label: `gpu-${mode}`, mode, device: DEVICE, spawn: placedPair() }),
    );
  }
}

/** The gemm2048 phase alone (BENCH_GPU_GEMM_ONLY): rates and round trips printed, no JSON. */
async function gemmOnly(): Promise<void> {
  const clusters = new Map<string, Cluster>();
  try {
    await startSetups(clusters, MODES);
    console.log(`  gemm 2048 only: ${PIPELINE} in flight, ${[...clusters.keys()].join(", ")}`);
    const byName = await inRounds(
      clusters,
      ROUNDS,
      async (name, cluster, round) => {
        traceSeq("round.start", round, GEMM_SETUPS.indexOf(name));
        const { result: r, profiles } = await profilePhase(
          cluster.nodes,
          `${name}-${round + 1}`,
          () => gemmRate(cluster),
        );
        traceSeq("round.end", round, GEMM_SETUPS.indexOf(name));
        console.log(
          `    ${name} round ${round + 1}: ${r.perSecond.toFixed(1)} iter/s, round trip p50 ${r.tripP50Ms.toFixed(2)} ms p99 ${r.tripP99Ms.toFixed(2)} ms`,
        );
        for (const file of profiles) console.log(formatSummary(summarizeProfile(file, 12), file));
        return r.perSecond;
      },
      (_, cluster) => gemmRate(cluster, { warmupMs: WARM_MS, measureMs: 300 }),
    );
    if (profileRoot() !== undefined) console.log(`  profiles under ${profileRoot()}`);
    for (const mode of MODES) {
      const ratio = medianRatio(byName[mode]!, byName.standalone!);
      console.log(`  ${mode}/standalone: ${ratio.toFixed(3)} (median of per-round ratios)`);
    }
  } finally {
    for (const c of clusters.values()) await c.stop();
  }
}

/**
 * The small-call phase alone (BENCH_GPU_SMALL_ONLY): a standalone node and a sync pair, each in
 * BENCH_ROUNDS rounds (round rows traced as the gemm phase's), p50/p99 printed, no JSON.
 */
async function smallOnly(): Promise<void> {
  const clusters = new Map<string, Cluster>();
  try {
    await startSetups(clusters, ["sync"]);
    await inRounds(clusters, ROUNDS, async (name, cluster, round) => {
      traceSeq("round.start", round, GEMM_SETUPS.indexOf(name));
      const r = await smallCall(cluster);
      traceSeq("round.end", round, GEMM_SETUPS.indexOf(name));
      console.log(
        `    small call ${name} round ${round + 1}: p50 ${r.p50.toFixed(0)} µs p99 ${r.p99.toFixed(0)} µs (${r.calls} calls)`,
      );
    });
  } finally {
    for (const c of clusters.values()) await c.stop();
  }
}

/** One small launch at a time (increment_u32 of one word): µs per round trip (traced as gemm's). */
function smallCall(cluster: Cluster) {
  return withClients(cluster.primary.guest, 1, async ([c]) => {
    const { session, context } = c!;
    const bo = await session.allocBo(context, 4096);
    const args = [buf(bo), u32(1), u32(1)];
    await warm(() => session.launch(context, "increment_u32", args));
    const samples: number[] = [];
    const end = performance.now() + LATENCY_MS;
    while (performance.now() < end) {
      const n = ++launchesTraced;
      traceSeq("g.send", n);
      const t = performance.now();
      await session.launch(context, "increment_u32", args);
      const ms = performance.now() - t;
      traceSeq("g.reply", n, ms);
      samples.push(ms * 1000);
    }
    return { p50: percentile(samples, 50), p99: percentile(samples, 99), calls: samples.length };
  });
}

/** spawnVgpud placing the node on GPU `index` when VGPUHA_TEST_GPUS says there are several. */
function placed(index: number): typeof spawnVgpud | undefined {
  const wrap = gpuWrap(index);
  return wrap === undefined
    ? undefined
    : (o) => spawnVgpud({ ...o, wrap: [...wrap, ...(o.wrap ?? [])] });
}

export async function runGpu(): Promise<void> {
  const started = performance.now();
  const gpu = (await import(MODULE ?? ["@vgpu-ha", "gpu-webgpu"].join("/"))) as GpuModule;
  if (MODULE) {
    console.log(`  SMOKE TEST with ${MODULE}: no GPU figures`);
    process.env.VGPU_TESTING__WEBGPU_MODULE = MODULE; // the nodes' config (VGPU_* overrides)
  }
  if (process.env.BENCH_GPU_GEMM_ONLY === "1") return gemmOnly();
  if (process.env.BENCH_GPU_SMALL_ONLY === "1") return smallOnly();
  console.log("  isolated kernels (no vgpud)");
  const isolated = await measureIsolated(gpu);

  const clusters = new Map<"standalone" | "async" | "sync", Cluster>();
  const metrics: Metric[] = [];
  let small: Record<string, { p50: number; p99: number; calls: number }> = {};
  let vgpud: Record<string, number> = {};
  let gemmRounds: Record<string, number[]> = {};
  try {
    clusters.set(
      "standalone",
      await startStandalone("gpu-standalone", { device: DEVICE, spawn: placed(0) }),
    );
    console.log("  kernels through a standalone webgpu vgpud");
    vgpud = await measureVgpud(clusters.get("standalone")!);
    for (const mode of MODES) {
      // The standby is placed on the second GPU: startPair's spawn is shared, so it gets GPU 1
      // through its own wrap only when two GPUs are configured (placedPair).
      clusters.set(
        mode,
        await startPair({ label: `gpu-${mode}`, mode, device: DEVICE, spawn: placedPair() }),
      );
    }
    console.log("  gemm 2048 through vgpud: standalone, async, sync");
    const byName = await inRounds(
      clusters,
      ROUNDS,
      async (name, cluster, round) => {
        traceSeq("round.start", round, GEMM_SETUPS.indexOf(name));
        const r = await gemmRate(cluster);
        traceSeq("round.end", round, GEMM_SETUPS.indexOf(name));
        console.log(
          `    ${name} round ${round + 1}: ${r.perSecond.toFixed(1)} iter/s, round trip p50 ${r.tripP50Ms.toFixed(2)} ms p99 ${r.tripP99Ms.toFixed(2)} ms`,
        );
        return r.perSecond;
      },
      (_, cluster) => gemmRate(cluster, { warmupMs: WARM_MS, measureMs: 300 }),
    );
    gemmRounds = byName;
    console.log("  small call round trip: standalone, sync, and a model node for reference");
    small = {
      standalone: await smallCall(clusters.get("standalone")!),
      sync: await smallCall(clusters.get("sync")!),
    };
    const model = await startStandalone("gpu-model-standalone", { device: { backend: "model" } });
    try {
      small.model_standalone = await smallCall(model);
    } finally {
      await model.stop();
    }
  } finally {
    for (const c of clusters.values()) await c.stop();
  }
  console.log(`  failover with a webgpu standby (${FAILOVER_ROUNDS} rounds)`);
  const wraps = { a: gpuWrap(0), b: gpuWrap(1) };
  const failover = await runSetting(
    {
      name: "webgpu",
      describe: "webgpu → webgpu sync pair, default lease (500/100/50 ms)",
      lease: undefined,
      targets: true,
      device: { ...DEVICE, vramBytes: "4GiB", maxBoBytes: "1GiB" },
      wraps: Object.fromEntries(Object.entries(wraps).filter(([, w]) => w !== undefined)),
      rounds: FAILOVER_ROUNDS,
    },
    undefined,
  );

  for (const c of CASES) {
    const iso = isolated.perKernelMs[c.kernel]!;
    const via = vgpud[c.kernel]!;
    metrics.push({
      name: `${c.kernel}_ms`,
      value: iso,
      unit: `ms per launch, isolated (${c.shape})`,
    });
    metrics.push({
      name: `${c.kernel}_vgpud_ms`,
      value: via,
      unit: `ms per launch through vgpud (${c.shape}, ${PIPELINE} in flight)`,
    });
    if (c.bytes !== undefined) {
      metrics.push({
        name: `${c.kernel}_gb_per_s_isolated`,
        value: c.bytes / iso / 1e6,
        unit: "GB/s (bytes read + written)",
      });
      metrics.push({
        name: `${c.kernel}_gb_per_s_vgpud`,
        value: c.bytes / via / 1e6,
        unit: "GB/s through vgpud",
      });
    }
    if (c.flops !== undefined) {
      metrics.push({
        name: `${c.kernel}_gflops_isolated`,
        value: c.flops / iso / 1e6,
        unit: "GFLOP/s",
      });
    }
  }
  const gemmFlops = GEMM_CASE.flops!;
  metrics.push({
    name: "gemm2048_tflops_isolated",
    value: gemmFlops / isolated.perKernelMs.gemm_f32! / 1e9,
    unit: "TFLOP/s (probe: 20.2 no-FMA WGSL; CUDA cuBLAS 50)",
  });
  const standalonePerS = median(gemmRounds.standalone!);
  metrics.push({
    name: "gemm2048_tflops_vgpud",
    value: (gemmFlops * standalonePerS) / 1e12,
    unit: "TFLOP/s through a standalone vgpud",
  });
  for (const name of ["standalone", "async", "sync"]) {
    metrics.push({
      name: `gemm2048_${name}_iter_per_s`,
      value: median(gemmRounds[name]!),
      unit: `iter/s (median of ${ROUNDS} rounds, ${PIPELINE} in flight)`,
    });
  }
  for (const mode of ["async", "sync"]) {
    metrics.push({
      name: `gemm2048_${mode}_over_standalone`,
      value: medianRatio(gemmRounds[mode]!, gemmRounds.standalone!),
      unit: "ratio",
      ...(mode === "sync"
        ? { target: { kind: "atLeast" as const, value: 0.95, note: "#17" } }
        : {}),
    });
  }
  for (const [name, s] of Object.entries(small)) {
    metrics.push({
      name: `small_call_${name}_p50_us`,
      value: s.p50,
      unit: `µs (${s.calls} calls)`,
    });
    metrics.push({ name: `small_call_${name}_p99_us`, value: s.p99, unit: "µs" });
  }
  const fo = settingMetrics(failover).map((m) => ({ ...m, name: m.name.replace(/^webgpu_/, "") }));
  metrics.push(...fo);
  publish({
    name: "gpu",
    header: { adapter: isolated.adapter },
    metrics,
    notes: [
      `adapter: ${JSON.stringify(isolated.adapter)}`,
      `nodes' device.webgpu.eventIntervalUs: ${process.env.VGPU_DEVICE__WEBGPU__EVENT_INTERVAL_US ?? "the default (200)"}`,
      `GPUs used by the pairs: ${process.env.VGPUHA_TEST_GPUS ?? "1"} (VGPUHA_TEST_GPUS; 1 = both nodes of a pair on one GPU)`,
      `isolated: wall ms per launch over ${BATCH} launches submitted together, median of ${REPS}, after ${WARM_MS} ms of gemm to warm the clock; includes Dawn's per-dispatch encoding, not GPU timestamps; Dawn polled every loop turn (eventIntervalUs 0); the nodes run the default (device.webgpu.eventIntervalUs)`,
      `vgpud: ${PIPELINE} launches in flight from one guest session, ${DURATIONS.warmupMs} ms warm-up + ${DURATIONS.measureMs} ms; gemm2048 set-ups in ${ROUNDS} rotating rounds; ratios are medians of per-round ratios`,
      "small call: increment_u32 of one word, one at a time, after a warm-up; µs per round trip from the guest library; small_call_model_standalone_* is a CPU-model node (device.thread worker) on the same host, for reference",
      `failover: bench/failover.ts rounds (kill, pause, switchover) on a webgpu → webgpu sync pair, ${failover.kill.length} rounds`,
      "CUDA figures (data.cudaProbe) are the feasibility probe's on an H100 80GB HBM3, not this run",
      `whole run ${((performance.now() - started) / 1000).toFixed(0)} s`,
    ],
    data: {
      adapter: isolated.adapter,
      cudaProbe: CUDA_PROBE,
      isolatedMs: isolated.perKernelMs,
      vgpudMs: vgpud,
      gemmRounds,
      small,
      failover,
    },
  });
}

/** startPair's spawn: the primary on GPU 0 and the standby on GPU 1 when there are two. */
function placedPair(): typeof spawnVgpud | undefined {
  if (gpuWrap(0) === undefined) return undefined;
  return (o) => {
    const standby = String((o.config as { role?: string }).role) === "standby";
    return placed(standby ? 1 : 0)!(o);
  };
}
