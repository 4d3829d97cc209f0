// What crossing to the device thread costs (issue #14): the same calls through the paravirtual
// backend with the device inline (on the caller's thread), on its own worker_threads thread as
// a node runs it (small operations run on the main thread while the device is idle:
// idle-inline.ts), and on its thread with every operation crossing (inlineMaxBytes 0), side
// by side in one run. Per call, pipelined (a batch of small calls submitted in one event-loop
// turn, then awaited: one postMessage each way per batch) and serial (each call awaited before
// the next: a full round trip), and 64 KiB dmaWrite / dmaRead throughput.

import { performance } from "node:perf_hooks";
import { type Call, type CallResult, ErrorCode } from "@vgpu-ha/common";
import { Backend, type Failure } from "@vgpu-ha/gpu-model";
import { workerExecutor } from "@vgpu-ha/gpu-model/worker";
import { benchBackendOptions } from "./gpu-model.js";
import { type Metric, publish } from "./report.js";
import { median } from "./timing.js";

const MiB = 2 ** 20;
const TENANT = "bench";
const BIG_BYTES = 64 * 1024;
const PIPELINED_BATCH = 1000;
const BIG_BATCH = 256;
const ROUNDS = 7;
const SERIAL_CALLS = 2000;

type Thread = "inline" | "worker" | "worker_cross";
type SessionRecord = Exclude<ReturnType<Backend["openSession"]>, Failure>;

function newBackend(thread: Thread): Backend {
  return new Backend({
    ...benchBackendOptions(false),
    executor:
      thread === "inline"
        ? undefined
        : workerExecutor({
            maxCallMs: 10_000,
            ...(thread === "worker" ? {} : { inlineMaxBytes: 0 }),
          }),
  });
}

/** One session driven in process, as the node applies a guest's frames. */
class Guest {
  readonly backend: Backend;
  private readonly session: SessionRecord;
  private frame = 0;
  readonly context: number;
  readonly bo: number;

  constructor(backend: Backend) {
    this.backend = backend;
    const session = backend.openSession("s", TENANT);
    if ("code" in session) throw new Error(session.message);
    this.session = session;
    this.context = handle(this.call({ op: "contextCreate" }));
    this.bo = handle(this.call({ op: "boAlloc", context: this.context, sizeBytes: 4 * MiB }));
  }

  call(call: Call): CallResult {
    const body = { kind: "call", call } as const;
    const outcome = this.backend.applyFrame(this.session, { number: ++this.frame, body });
    if (outcome.result.code !== ErrorCode.OK)
      throw new Error(`${call.op}: ${outcome.result.message}`);
    return outcome.result;
  }

  /** Resolves once the device has done everything submitted so far. */
  settled(): Promise<void> {
    return new Promise((resolve) => this.backend.progress.afterDevice(resolve));
  }
}

function handle(r: CallResult): number {
  if (r.output.kind !== "handle") throw new Error("no handle");
  return r.output.handle;
}

/** Seconds per call of `batch` calls made by `one(i)` in one turn, then awaited; median of rounds. */
async function pipelined(g: Guest, batch: number, one: (i: number) => void): Promise<number> {
  const samples: number[] = [];
  for (let round = 0; round <= ROUNDS; round++) {
    const start = performance.now();
    for (let i = 0; i < batch; i++) one(i);
    await g.settled();
    if (round > 0) samples.push((performance.now() - start) / 1000 / batch); // round 0 warms up
  }
  return median(samples);
}

/** Seconds per call when each call is awaited before the next. */
async function serial(g: Guest, one: (i: number) => void): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < SERIAL_CALLS; i++) {
    one(i);
    await g.settled();
  }
  return (performance.now() - start) / 1000 / SERIAL_CALLS;
}

async function measure(thread: Thread) {
  const backend = newBackend(thread);
  try {
    const g = new Guest(backend);
    const small = new Uint8Array(16);
    const big = new Uint8Array(BIG_BYTES).fill(7);
    const smallWrite = (i: number) =>
      g.call({
        op: "dmaWrite",
        context: g.context,
        bo: g.bo,
        offset: (i % 1024) * 16,
        data: small,
      });
    const at = (i: number) => (i % ((4 * MiB) / BIG_BYTES)) * BIG_BYTES;
    return {
      smallPipelinedS: await pipelined(g, PIPELINED_BATCH, smallWrite),
      smallSerialS: await serial(g, smallWrite),
      writeS: await pipelined(g, BIG_BATCH, (i) =>
        g.call({ op: "dmaWrite", context: g.context, bo: g.bo, offset: at(i), data: big }),
      ),
      readS: await pipelined(g, BIG_BATCH, (i) =>
        g.call({ op: "dmaRead", context: g.context, bo: g.bo, offset: at(i), length: BIG_BYTES }),
      ),
    };
  } finally {
    backend.close();
  }
}

export async function runDeviceCrossing(): Promise<void> {
  const inline = await measure("inline");
  const worker = await measure("worker");
  const cross = await measure("worker_cross");
  const us = (s: number) => s * 1e6;
  const mbps = (s: number) => BIG_BYTES / s / 1e6;
  const metrics: Metric[] = [];
  for (const [name, r] of [
    ["inline", inline],
    ["worker", worker],
    ["worker_cross", cross],
  ] as const) {
    metrics.push(
      { name: `${name}_small_call_pipelined_us`, value: us(r.smallPipelinedS), unit: "µs/call" },
      { name: `${name}_small_call_serial_us`, value: us(r.smallSerialS), unit: "µs/call" },
      { name: `${name}_dma_write_64k_mb_per_s`, value: mbps(r.writeS), unit: "MB/s" },
      { name: `${name}_dma_read_64k_mb_per_s`, value: mbps(r.readS), unit: "MB/s" },
    );
  }
  const crossingPipelined = us(cross.smallPipelinedS - inline.smallPipelinedS);
  const crossingSerial = us(cross.smallSerialS - inline.smallSerialS);
  metrics.push(
    { name: "crossing_pipelined_us", value: crossingPipelined, unit: "µs/call" },
    { name: "crossing_serial_us", value: crossingSerial, unit: "µs/call" },
  );
  publish({
    name: "device-crossing",
    metrics,
    ratios: {
      worker_over_inline_small_pipelined: worker.smallPipelinedS / inline.smallPipelinedS,
      worker_over_inline_dma_write_64k: inline.writeS / worker.writeS,
      worker_over_inline_dma_read_64k: inline.readS / worker.readS,
      worker_cross_over_inline_small_pipelined: cross.smallPipelinedS / inline.smallPipelinedS,
    },
    notes: [
      `small call: a 16-byte dmaWrite through Backend.applyFrame; pipelined: ${PIPELINED_BATCH} per event-loop turn, then awaited (median of ${ROUNDS} rounds); serial: ${SERIAL_CALLS} calls, each awaited (afterDevice) before the next`,
      `64 KiB dmaWrite / dmaRead: ${BIG_BATCH} per turn, awaited, median of ${ROUNDS} rounds; MB/s of payload`,
      "worker: the device thread as a node runs it (small operations run on the main thread while the device is idle); worker_cross: every operation crosses (inlineMaxBytes 0)",
      "crossing_*: worker_cross minus inline per call (what the thread hop adds; on this shared 2-core machine the device thread competes with the caller)",
    ],
  });
}
