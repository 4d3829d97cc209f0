// Where a small call's time goes on a webgpu node (issue #17), on a GPU host:
// `npm run bench -- gpu-latency` writes bench/results/gpu-latency.json. Each probe runs one
// operation at a time for PROBE_MS after a warm-up and reports p50/p99 µs:
//   raw Dawn   an event-loop turn (setImmediate); an empty submit + onSubmittedWorkDone; a
//              one-word increment_u32 dispatch (bind group and parameters made once) +
//              onSubmittedWorkDone; the same + copy to a kept mappable buffer + mapAsync; the
//              same with a mappable buffer made per call; the dispatch with a 64 KiB
//              mapped-at-creation parameter buffer and a bind group made per call (what the
//              executor did before its pools); with two error scopes; mapAsync of an idle buffer
//   executor   ExecutorDriver.run of [launch] and [launch, read 4 bytes] on the WebGPU
//              executor, with and without error scopes; BENCH_GPU_OLD_MODULE (a gpu-webgpu
//              dist/index.js of another build) adds the same on that build's executor
//   gemm       gemm_f32 2048³ per launch, 20 launches in one submit, median of 5, after the
//              GPU was kept busy for 500 ms: the executor's kernel, and gemmWgsl(8 | 16) raw
/// <reference types="@webgpu/types" />
import { performance } from "node:perf_hooks";
import type { DeviceExecutor, DeviceOp, OpResult } from "@vgpu-ha/gpu-model";
import { type Metric, publish } from "./report.js";
import { median, percentile } from "./timing.js";

// BENCH_GPU_PROBE_MS, BENCH_GPU_GEMM and VGPU_WEBGPU_FLAGS / VGPU_WEBGPU_COMPAT (Dawn flags and
// a compatibility adapter, as the GPU tests take them) are for a smoke test on a host without a
// GPU (Mesa llvmpipe), never for results.
const PROBE_MS = Number(process.env.BENCH_GPU_PROBE_MS ?? 1500);
const WARM_MS = 500;
const GEMM = Number(process.env.BENCH_GPU_GEMM ?? 2048);
const OPEN = {
  dawnFlags: (process.env.VGPU_WEBGPU_FLAGS ?? "").split(",").filter((f) => f !== ""),
  compatibility: process.env.VGPU_WEBGPU_COMPAT === "1",
};
const GEMM_BATCH = 20;
const GEMM_REPS = 5;
const ONE_F32 = 0x3f800000;

interface Driver {
  run(ops: readonly DeviceOp[]): Promise<OpResult[]>;
}

interface GpuModule {
  openGpu(o: object): Promise<{
    context: { device: GPUDevice; pipelines: ReadonlyMap<string, GPUComputePipeline> };
    identity: Record<string, unknown>;
    maxBufferBytes: number;
  }>;
  WebGpuExecutor: new (
    context: unknown,
    options: { maxBufferBytes: number; errorScopes?: boolean },
  ) => DeviceExecutor & { close(): void };
  ExecutorDriver: new (executor: DeviceExecutor) => Driver;
  gemmWgsl?: (depth: number) => string;
  PRELUDE?: string;
}

const Usage = { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 };

/** Runs `call` one at a time: WARM_MS of warm-up, then PROBE_MS of samples (µs). */
async function probe(name: string, call: () => Promise<unknown>) {
  const warmEnd = performance.now() + WARM_MS;
  while (performance.now() < warmEnd) await call();
  const samples: number[] = [];
  const end = performance.now() + PROBE_MS;
  while (performance.now() < end) {
    const t = performance.now();
    await call();
    samples.push((performance.now() - t) * 1000);
  }
  const r = { p50: percentile(samples, 50), p99: percentile(samples, 99), calls: samples.length };
  console.log(
    `  ${name.padEnd(34)} p50 ${r.p50.toFixed(1).padStart(8)} µs  p99 ${r.p99.toFixed(1).padStart(8)} µs  (${r.calls})`,
  );
  return r;
}

function params(device: GPUDevice, scalars: readonly number[], groups: number): GPUBuffer {
  const words = new Uint32Array(12);
  words.set(scalars);
  new Float32Array(words.buffer, 8 * 4, 1)[0] = 1;
  words[9] = groups;
  words[10] = groups;
  const buffer = device.createBuffer({ size: 256, usage: Usage.UNIFORM | Usage.COPY_DST });
  device.queue.writeBuffer(buffer, 0, words);
  return buffer;
}

async function rawProbes(device: GPUDevice, increment: GPUComputePipeline) {
  const queue = device.queue;
  const word = device.createBuffer({
    size: 4096,
    usage: Usage.STORAGE | Usage.COPY_SRC | Usage.COPY_DST,
  });
  const p = params(device, [1, 1], 1);
  const group = device.createBindGroup({
    layout: increment.getBindGroupLayout(0),
    entries: [
      { binding: 0, resource: { buffer: p, size: 48 } },
      { binding: 1, resource: { buffer: word } },
    ],
  });
  const kept = device.createBuffer({ size: 256, usage: Usage.MAP_READ | Usage.COPY_DST });
  const encodeDispatch = (g: GPUBindGroup = group) => {
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    pass.setPipeline(increment);
    pass.setBindGroup(0, g);
    pass.dispatchWorkgroups(1);
    pass.end();
    return encoder;
  };
  const results: Record<string, { p50: number; p99: number; calls: number }> = {};
  results.set_immediate = await probe("setImmediate", () => new Promise(setImmediate));
  results.submit_empty_done = await probe("empty submit + workDone", () => {
    queue.submit([]);
    return queue.onSubmittedWorkDone();
  });
  results.dispatch_done = await probe("dispatch + workDone", () => {
    queue.submit([encodeDispatch().finish()]);
    return queue.onSubmittedWorkDone();
  });
  results.dispatch_map = await probe("dispatch + copy + mapAsync", async () => {
    const encoder = encodeDispatch();
    encoder.copyBufferToBuffer(word, 0, kept, 0, 4);
    queue.submit([encoder.finish()]);
    await kept.mapAsync(1);
    new Uint8Array(kept.getMappedRange(), 0, 4).slice();
    kept.unmap();
  });
  results.dispatch_map_fresh = await probe("dispatch + copy + mapAsync (new)", async () => {
    const target = device.createBuffer({ size: 4, usage: Usage.MAP_READ | Usage.COPY_DST });
    const encoder = encodeDispatch();
    encoder.copyBufferToBuffer(word, 0, target, 0, 4);
    queue.submit([encoder.finish()]);
    await target.mapAsync(1);
    new Uint8Array(target.getMappedRange(), 0, 4).slice();
    target.destroy();
  });
  results.dispatch_fresh_upload = await probe("dispatch, 64K upload + group (new)", () => {
    const upload = device.createBuffer({
      size: 64 << 10,
      usage: Usage.UNIFORM | Usage.STORAGE | Usage.COPY_SRC,
      mappedAtCreation: true,
    });
    const words = new Uint32Array(upload.getMappedRange(0, 48));
    words.set([1, 1, 0, 0, 0, 0, 0, 0, ONE_F32, 1, 1, 0]);
    upload.unmap();
    const g = device.createBindGroup({
      layout: increment.getBindGroupLayout(0),
      entries: [
        { binding: 0, resource: { buffer: upload, size: 48 } },
        { binding: 1, resource: { buffer: word } },
      ],
    });
    queue.submit([encodeDispatch(g).finish()]);
    return queue.onSubmittedWorkDone().then(() => upload.destroy());
  });
  results.dispatch_scopes = await probe("dispatch + 2 error scopes", () => {
    device.pushErrorScope("validation");
    device.pushErrorScope("out-of-memory");
    queue.submit([encodeDispatch().finish()]);
    return Promise.all([
      queue.onSubmittedWorkDone(),
      device.popErrorScope(),
      device.popErrorScope(),
    ]);
  });
  results.map_idle = await probe("mapAsync of an idle buffer", async () => {
    await kept.mapAsync(1);
    kept.unmap();
  });
  word.destroy();
  kept.destroy();
  p.destroy();
  return results;
}

async function executorProbes(gpu: GpuModule, label: string, errorScopes: boolean) {
  const { context, maxBufferBytes } = await gpu.openGpu(OPEN);
  const executor = new gpu.WebGpuExecutor(context, { maxBufferBytes, errorScopes });
  const driver = new gpu.ExecutorDriver(executor);
  await driver.run([{ k: "alloc", id: 1, size: 4096 }]);
  const launch: DeviceOp = { k: "launch", kernel: "increment_u32", args: [{ buffer: 1 }, 1, 1] };
  const read: DeviceOp = { k: "read", id: 1, offset: 0, length: 4 };
  const results = {
    launch: await probe(`${label} [launch]`, () => driver.run([launch])),
    launch_read: await probe(`${label} [launch, read]`, () => driver.run([launch, read])),
  };
  executor.close();
  context.device.destroy();
  return results;
}

/** ms per gemm 2048³ launch through the executor (GEMM_BATCH per run, median of GEMM_REPS). */
async function executorGemm(gpu: GpuModule, label: string) {
  const { context, maxBufferBytes } = await gpu.openGpu(OPEN);
  const executor = new gpu.WebGpuExecutor(context, { maxBufferBytes });
  const driver = new gpu.ExecutorDriver(executor);
  const bytes = 4 * GEMM * GEMM;
  const fill = (id: number): DeviceOp => ({
    k: "launch",
    kernel: "fill",
    args: [{ buffer: id }, GEMM * GEMM, ONE_F32],
  });
  await driver.run([1, 2, 3].map((id) => ({ k: "alloc", id, size: bytes }) as DeviceOp));
  await driver.run([fill(1), fill(2), fill(3)]);
  const gemm: DeviceOp = {
    k: "launch",
    kernel: "gemm_f32",
    args: [{ buffer: 1 }, { buffer: 2 }, { buffer: 3 }, GEMM, GEMM, GEMM],
  };
  const ms = await timeGemm(() => driver.run(Array.from({ length: GEMM_BATCH }, () => gemm)));
  console.log(`  gemm ${label}: ${ms.toFixed(3)} ms, ${tflops(ms).toFixed(2)} TFLOP/s`);
  executor.close();
  context.device.destroy();
  return ms;
}

async function timeGemm(batch: () => Promise<unknown>): Promise<number> {
  const warmEnd = performance.now() + WARM_MS;
  while (performance.now() < warmEnd) await batch();
  const samples: number[] = [];
  for (let r = 0; r < GEMM_REPS; r++) {
    const t = performance.now();
    await batch();
    samples.push((performance.now() - t) / GEMM_BATCH);
  }
  return median(samples);
}

const tflops = (ms: number) => (2 * GEMM ** 3) / ms / 1e9;

/** ms per gemm launch of gemmWgsl(depth), compiled here, bound once. */
async function rawGemm(gpu: GpuModule, device: GPUDevice, depth: number) {
  const module = device.createShaderModule({ code: gpu.PRELUDE! + gpu.gemmWgsl!(depth) });
  const pipeline = await device.createComputePipelineAsync({
    layout: "auto",
    compute: { module, entryPoint: "main" },
  });
  const bytes = 4 * GEMM * GEMM;
  const buffers = [0, 1, 2].map(() =>
    device.createBuffer({ size: bytes, usage: Usage.STORAGE | Usage.COPY_DST }),
  );
  const ones = new Float32Array(GEMM * GEMM).fill(1);
  for (const b of buffers.slice(1)) device.queue.writeBuffer(b, 0, ones);
  const tiles = GEMM / 128;
  const p = params(device, [GEMM, GEMM, GEMM, tiles], tiles * tiles);
  const group = device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: [
      { binding: 0, resource: { buffer: p, size: 48 } },
      ...buffers.map((buffer, i) => ({ binding: i + 1, resource: { buffer } })),
    ],
  });
  const ms = await timeGemm(() => {
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    for (let i = 0; i < GEMM_BATCH; i++) pass.dispatchWorkgroups(tiles * tiles);
    pass.end();
    device.queue.submit([encoder.finish()]);
    return device.queue.onSubmittedWorkDone();
  });
  console.log(`  gemm raw depth ${depth}: ${ms.toFixed(3)} ms, ${tflops(ms).toFixed(2)} TFLOP/s`);
  for (const b of buffers) b.destroy();
  p.destroy();
  return ms;
}

export async function runGpuLatency(): Promise<void> {
  const started = performance.now();
  const gpu = (await import(["@vgpu-ha", "gpu-webgpu"].join("/"))) as GpuModule;
  const oldPath = process.env.BENCH_GPU_OLD_MODULE;
  const old = oldPath ? ((await import(oldPath)) as GpuModule) : undefined;
  const metrics: Metric[] = [];
  const { context, identity } = await gpu.openGpu(OPEN);
  const device = context.device;
  console.log(`  adapter ${JSON.stringify(identity)}`);
  console.log("  raw Dawn, one at a time");
  const raw = await rawProbes(device, context.pipelines.get("increment_u32")!);
  console.log("  executor, one at a time");
  const executor: Record<string, Record<string, { p50: number; p99: number }>> = {
    new: await executorProbes(gpu, "executor", true),
    new_no_scopes: await executorProbes(gpu, "executor, no scopes", false),
  };
  if (old) executor.old = await executorProbes(old, "old executor", true);
  console.log("  gemm 2048³");
  const gemm: Record<string, number> = {
    executor: await executorGemm(gpu, "executor"),
    raw_depth_8: await rawGemm(gpu, device, 8),
    raw_depth_16: await rawGemm(gpu, device, 16),
  };
  if (old) gemm.old_executor = await executorGemm(old, "old executor");
  device.destroy();

  for (const [name, r] of Object.entries(raw)) {
    metrics.push({
      name: `raw_${name}_p50_us`,
      value: r.p50,
      unit: `µs (p99 ${r.p99.toFixed(0)})`,
    });
  }
  for (const [build, probes] of Object.entries(executor)) {
    for (const [name, r] of Object.entries(probes)) {
      metrics.push({
        name: `executor_${build}_${name}_p50_us`,
        value: r.p50,
        unit: `µs (p99 ${r.p99.toFixed(0)})`,
      });
    }
  }
  for (const [name, ms] of Object.entries(gemm)) {
    metrics.push({ name: `gemm2048_${name}_ms`, value: ms, unit: "ms per launch" });
    metrics.push({ name: `gemm2048_${name}_tflops`, value: tflops(ms), unit: "TFLOP/s" });
  }
  publish({
    name: "gpu-latency",
    header: { adapter: identity },
    metrics,
    notes: [
      `one operation at a time, ${WARM_MS} ms warm-up then ${PROBE_MS} ms of samples per probe`,
      `gemm: ${GEMM_BATCH} launches per submit, median of ${GEMM_REPS}, wall time, after ${WARM_MS} ms busy`,
      old ? `old executor: ${oldPath}` : "no old executor (BENCH_GPU_OLD_MODULE unset)",
      `whole run ${((performance.now() - started) / 1000).toFixed(0)} s`,
    ],
    data: { adapter: identity, raw, executor, gemm },
  });
}
