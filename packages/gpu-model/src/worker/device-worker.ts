// The device thread's entry (built JS: dist/worker/device-worker.js): a DeviceCore that owns
// VRAM and runs the batches of operations the main thread posts, in order, answering
// completions in batches (and early when an operation ran long, so a slow kernel does not hold
// back the completions of the work before it). It publishes the operation it is running and
// when it started, for the main thread's watchdog.
import { parentPort, workerData } from "node:worker_threads";
import { DeviceCore } from "../device/device-core.js";
import type { OpResult } from "../device/ops.js";
import { type Completions, type OpBatch, transferablesOf, type WorkerStart } from "./protocol.js";

/** Completions wait at most this long for the rest of their batch. */
const POST_EVERY_MS = 2;

const start = workerData as WorkerStart;
const watch = new Float64Array(start.watch);
const scratch = new Int32Array(new SharedArrayBuffer(4));
const delayMs = start.kernelDelayMs;
const only = start.kernelDelayOnly;
const core = new DeviceCore(
  delayMs > 0
    ? {
        beforeKernel: (kernel) => {
          if (only === undefined || kernel === only) Atomics.wait(scratch, 0, 0, delayMs);
        },
      }
    : {},
);
const port = parentPort!;

port.on("message", (batch: OpBatch) => {
  let results: (readonly [number, OpResult])[] = [];
  let transfer: ArrayBuffer[] = [];
  let lastPost = Date.now();
  const post = (upTo: number) => {
    port.postMessage({ upTo, results } satisfies Completions, transfer);
    results = [];
    transfer = [];
  };
  for (let i = 0; i < batch.ops.length; i++) {
    const index = batch.first + i;
    const op = batch.ops[i]!;
    // A kernel may run long: what ran before it is reported first.
    if (op.k === "launch" && i > 0) post(index - 1);
    watch[1] = Date.now();
    watch[0] = index;
    const result = core.execute(op);
    if (result !== undefined) {
      results.push([index, result]);
      transfer.push(...transferablesOf(result));
    }
    const now = Date.now();
    if (now - lastPost >= POST_EVERY_MS && i < batch.ops.length - 1) {
      post(index);
      lastPost = now;
    }
  }
  watch[0] = 0;
  post(batch.first + batch.ops.length - 1);
});
