// Proves the device on its own thread (issue #14): a real worker_threads device, fed random
// workloads through the backend, gives every call the same result (dmaRead data included, read
// only once the device says it is done) and the same state digest as the inline device, with
// small operations run on the main thread while the device is idle and with every operation
// crossing; that a small operation runs at submit only when nothing before it is outstanding;
// and
// page writes whose bytes were given away (owned) move their buffer to the device thread
// instead of a copy, still land in VRAM, and the buffer moves back (writePages' `returned`)
// only after the device wrote it, whole and detached on the device side; and
// its watchdog fails the device when a kernel runs past maxCallMs (testing.kernelDelayMs), with
// the seq of the entry whose work was running.
import { describe, expect, it } from "vitest";
import type { DeviceFailure } from "../device/progress.js";
import { computeDigest, digestWhenDone, type StateDigest } from "../digest.js";
import { Backend } from "../paravirt/backend.js";
import {
  backendOptionsFor,
  generateWorkload,
  replay,
  runWorkload,
} from "../testing/random-workload.js";
import { TestGuest, testBackendOptions } from "../testing/test-guest.js";
import { WorkerExecutor, workerExecutor } from "./worker-executor.js";

const afterDevice = (backend: Backend) =>
  new Promise<void>((resolve) => backend.progress.afterDevice(resolve));
/** Launches fill(bo, n, value): its first n u32 become value. */
const fill = (g: TestGuest, context: number, bo: number, n: number, value: number) =>
  g.ok({
    op: "kernelLaunch",
    context,
    kernel: "fill",
    args: [
      { kind: "buffer", bo },
      { kind: "u32", value: n },
      { kind: "u32", value },
    ],
  });
const workerBackend = () =>
  new Backend({ ...testBackendOptions(), executor: workerExecutor({ maxCallMs: 10_000 }) });
const digestOf = (backend: Backend) =>
  new Promise<StateDigest>((resolve) => digestWhenDone(backend, resolve));

describe("WorkerExecutor", () => {
  it.each([
    [1, undefined],
    [2, undefined],
    [3, undefined],
    [1, 0],
    [2, 0],
  ])("gives the inline device's results and digest on workload %i (inlineMaxBytes %s)", async (seed, inlineMaxBytes) => {
    const workload = generateWorkload(seed, { frames: 400, sessions: 3 });
    const inline = replay(workload, 5);
    const backend = new Backend({
      ...backendOptionsFor(workload, 5),
      executor: workerExecutor({ maxCallMs: 10_000, inlineMaxBytes }),
    });
    try {
      const outcomes = runWorkload(backend, workload);
      expect(backend.progress.doneSeq(1)).toBeLessThanOrEqual(1);
      await afterDevice(backend);
      expect(outcomes).toEqual(inline.outcomes);
      expect(outcomes.some((o) => o.result.output.kind === "data")).toBe(true);
      expect(await digestOf(backend)).toEqual(computeDigest(inline.backend));
      expect(() => computeDigest(backend)).toThrow(/inline/);
    } finally {
      backend.close();
    }
  });

  it("runs a small operation at submit only while nothing before it is outstanding", async () => {
    const backend = workerBackend();
    try {
      const g = new TestGuest(backend, "g");
      const ctx = g.createContext();
      const bo = g.alloc(ctx, 4096); // the alloc crosses: the device thread must know the buffer
      const queue = backend.device.queue;
      expect(queue.outstanding).toBe(1);
      await afterDevice(backend);
      const bytes = new Uint8Array([1, 2, 3, 4]);
      g.ok({ op: "dmaWrite", context: ctx, bo, offset: 8, data: bytes });
      expect(queue.outstanding).toBe(0); // ran at submit
      fill(g, ctx, bo, 2, 9);
      const read = g.ok({ op: "dmaRead", context: ctx, bo, offset: 0, length: 12 });
      expect(queue.outstanding).toBe(2); // behind the kernel: both crossed
      await afterDevice(backend);
      const data = read.output.kind === "data" ? read.output.data : undefined;
      expect([...data!]).toEqual([9, 0, 0, 0, 9, 0, 0, 0, 1, 2, 3, 4]);
    } finally {
      backend.close();
    }
  });

  it("moves the buffer of owned page writes to the device thread, copies others", async () => {
    const backend = workerBackend();
    try {
      const g = new TestGuest(backend, "g");
      const ctx = g.createContext();
      const bo = g.alloc(ctx, 512 * 1024);
      const id = backend.contexts.get(ctx)!.bos.get(bo)!.bo.id;
      const given = new Uint8Array(300 * 1024).fill(5); // above the inline size: it crosses
      const kept = new Uint8Array(200 * 1024).fill(6);
      const device = backend.device;
      const returned: ArrayBuffer[][] = [];
      const back = new Promise<void>((resolve) =>
        device.writePages([{ id, at: 0, data: given.subarray(4096) }], true, (b) => {
          returned.push([...b]);
          resolve();
        }),
      );
      device.writePages([{ id, at: 300 * 1024, data: kept }]);
      expect(returned).toEqual([]); // not back before the device thread ran it
      await afterDevice(backend);
      await back;
      expect(given.buffer.byteLength).toBe(0); // moved (detached here): back as a new object
      expect(kept.byteLength).toBe(200 * 1024); // copied
      expect(returned.length).toBe(1);
      expect(returned[0]!.length).toBe(1);
      const again = new Uint8Array(returned[0]![0]!);
      expect(again.byteLength).toBe(300 * 1024); // the whole buffer, as it went
      expect(again.every((x) => x === 5)).toBe(true);
      const read = g.ok({ op: "dmaRead", context: ctx, bo, offset: 0, length: 512 * 1024 });
      await afterDevice(backend);
      const data = read.output.kind === "data" ? read.output.data : new Uint8Array();
      expect(data.subarray(0, 296 * 1024).every((x) => x === 5)).toBe(true);
      expect(data.subarray(296 * 1024, 300 * 1024).every((x) => x === 0)).toBe(true);
      expect(data.subarray(300 * 1024, 500 * 1024).every((x) => x === 6)).toBe(true);
    } finally {
      backend.close();
    }
  });

  it("fails the device when a kernel runs past maxCallMs, naming the entry's seq", async () => {
    const executor = workerExecutor({ maxCallMs: 50, kernelDelayMs: 400 });
    const backend = new Backend({ ...testBackendOptions(), executor });
    try {
      const g = new TestGuest(backend, "g");
      const ctx = g.createContext();
      const bo = g.alloc(ctx, 4096);
      backend.progress.beginSeq(7);
      const failed = new Promise<DeviceFailure>((resolve) => backend.progress.onFailure(resolve));
      fill(g, ctx, bo, 1024, 1);
      const failure = await failed;
      expect(failure.seq).toBe(7);
      expect(failure.reason).toMatch(/maxCallMs/);
      expect(backend.progress.failure).toEqual(failure);
      expect(backend.progress.doneSeq(9)).toBe(6);
    } finally {
      backend.close();
    }
  });

  it("reports the device thread's exit as a failure", async () => {
    const executor = new WorkerExecutor({ maxCallMs: 10_000 });
    const backend = new Backend({ ...testBackendOptions(), executor: () => executor });
    const failed = new Promise<DeviceFailure>((resolve) => backend.progress.onFailure(resolve));
    // Crashes the thread from inside: an operation the device core cannot run.
    backend.device.queue.submit({ k: "free", id: 1 });
    backend.device.queue.submit({ k: "read", id: 12345, offset: 0, length: 1 });
    expect((await failed).reason).toMatch(/device thread/);
    await executor.exited;
    backend.close();
  });
});
