// Proves, on a real GPU adapter, that the WebGPU executor is the model bit for bit: the golden
// vectors at start, every golden case and more kernel launches (specials, subnormals, odd
// sizes, aliasing, large grids) with equal hashes, random sequences of every operation kind
// (unaligned DMA, overlapping copies, MMIO stores, page batches, xor, hashes, snapshots with
// copy-on-write) with equal results op by op, a random guest workload through the paravirtual
// backend with equal digests, and a lost device reported to the sink. Needs an adapter: fails
// without one (npm run test:gpu; VGPU_WEBGPU_FLAGS, VGPU_WEBGPU_COMPAT: testing/gpu-env.ts).
import {
  Backend,
  computeDigest,
  DeviceCore,
  type DeviceOp,
  digestWhenDone,
  goldenVectors,
  modelGoldenHashes,
  type OpResult,
  type StateDigest,
} from "@vgpu-ha/gpu-model";
import { backendOptionsFor, generateWorkload, runWorkload } from "@vgpu-ha/gpu-model/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWebGpuExecutor, openGpu } from "./create.js";
import { ExecutorDriver } from "./driver.js";
import { WebGpuExecutor } from "./executor.js";
import { executorGoldenHash } from "./golden.js";
import type { GpuContext } from "./gpu-context.js";
import { gpuOptionsFromEnv } from "./testing/gpu-env.js";
import { kernelCaseOps, kernelCases } from "./testing/kernel-cases.js";
import { RandomOps } from "./testing/random-ops.js";

const options = gpuOptionsFromEnv();
let gpu: { context: GpuContext; maxBufferBytes: number };
let executor: WebGpuExecutor;
let driver: ExecutorDriver;

beforeAll(async () => {
  gpu = await openGpu(options);
  executor = new WebGpuExecutor(gpu.context, { maxBufferBytes: gpu.maxBufferBytes });
  driver = new ExecutorDriver(executor);
});

afterAll(() => {
  executor?.close();
  gpu?.context.device.destroy();
});

/**
 * Describes a result for comparison: bytes as hex, chunks with their pages' bytes. A chunk's
 * `wire` (the model lays its pages out in their wire form; the webgpu executor need not) is
 * left out: the pages' data, views into it, are compared.
 */
function plain(result: OpResult): unknown {
  if (result instanceof Uint8Array) return Buffer.from(result).toString("hex");
  if (result === undefined || Array.isArray(result)) return result;
  if ("returned" in result) return { returned: result.returned.length };
  const { wire: _wire, ...chunk } = result as Exclude<
    OpResult,
    Uint8Array | readonly string[] | undefined | { returned: unknown }
  >;
  return { ...chunk, pages: chunk.pages.map((p) => ({ ...p, data: plain(p.data) })) };
}

function onModel(ops: readonly DeviceOp[]): unknown[] {
  const core = new DeviceCore();
  return ops.map((op) => plain(core.execute(op)));
}

function expectSameResults(ops: readonly DeviceOp[], got: readonly OpResult[], want: unknown[]) {
  for (let i = 0; i < ops.length; i++) {
    expect(plain(got[i]), `operation ${i} (${ops[i]!.k})`).toEqual(want[i]);
  }
}

describe("the adapter", () => {
  it("passes the golden vectors at start and says who it is", async () => {
    const backend = await createWebGpuExecutor(options);
    try {
      console.log(`webgpu adapter: ${JSON.stringify(backend.adapter)}`);
      console.log(`golden vectors: ${JSON.stringify(backend.golden)}`);
      expect(backend.golden?.kernels).toHaveLength(9);
      expect(backend.adapter.webgpu).toBe("0.6.2");
    } finally {
      backend.executor.close();
    }
  });
});

describe("every golden case, one by one", () => {
  const model = new Map(modelGoldenHashes().map((h) => [h.name, h.hash]));
  it.each(goldenVectors().map((c) => [c.name, c] as const))("%s", async (_, c) => {
    expect(await executorGoldenHash(driver, c)).toBe(model.get(c.name));
  });
});

describe("more kernel launches", () => {
  it.each(kernelCases().map((c) => [`${c.kernel} ${c.name}`, c] as const))("%s", async (_, c) => {
    const ops = kernelCaseOps(c, 1);
    expectSameResults(ops, await driver.run(ops), onModel(ops));
  });
});

describe("random operations of every kind", () => {
  it.each([1, 2, 3, 4, 5, 6])("seed %i, submitted in one turn", async (seed) => {
    const ops = new RandomOps(seed).generate(300);
    expectSameResults(ops, await driver.run(ops), onModel(ops));
  });

  it.each([7, 8, 9])("seed %i, submitted over many turns", async (seed) => {
    const ops = new RandomOps(seed).generate(300);
    const want = onModel(ops);
    const got: OpResult[] = [];
    for (let at = 0; at < ops.length; ) {
      const end = Math.min(ops.length, at + 1 + (at % 23));
      got.push(...(await driver.run(ops.slice(at, end))));
      at = end;
    }
    expectSameResults(ops, got, want);
  });
});

describe("a random guest workload through the paravirtual backend", () => {
  it.each([11, 12, 13])("seed %i: equal digests with the model", async (seed) => {
    const workload = generateWorkload(seed, { frames: 400, sessions: 3 });
    const model = new Backend(backendOptionsFor(workload, 1));
    runWorkload(model, workload);
    const onGpu = new Backend({
      ...backendOptionsFor(workload, 2),
      executor: () => new WebGpuExecutor(gpu.context, { maxBufferBytes: gpu.maxBufferBytes }),
    });
    runWorkload(onGpu, workload);
    const digest = await new Promise<StateDigest>((resolve) => digestWhenDone(onGpu, resolve));
    expect(digest.state).toBe(computeDigest(model).state);
    onGpu.device.close();
  });
});

describe("device failure", () => {
  it("reports a lost device to the sink", async () => {
    const own = await openGpu(options);
    const lost = new WebGpuExecutor(own.context, { maxBufferBytes: own.maxBufferBytes });
    const d = new ExecutorDriver(lost);
    await d.run([{ k: "alloc", id: 1, size: 4096 }]);
    own.context.device.destroy();
    await expect(d.run([{ k: "read", id: 1, offset: 0, length: 4 }])).rejects.toThrow(
      /lost|destroyed/i,
    );
  });
});
