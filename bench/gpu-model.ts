// In-process benchmark of the GPU model behind the paravirtual backend: kernel bandwidth
// against a plain Buffer.copy of the same size in the same run, GEMM and stencil throughput,
// the MMIO store trap with dirty-page tracking, and buffer allocation. Every call goes
// through Backend.applyFrame, as the node applies a guest's frames.
import { type Call, type CallResult, ErrorCode, type KernelArg } from "@vgpu-ha/common";
import { Backend, type BackendOptions, type Failure } from "@vgpu-ha/gpu-model";
import { type Metric, publish } from "./report.js";
import { median, repeatFor, timeReps } from "./timing.js";

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const TENANT = "bench";

const BANDWIDTH_BYTES = 64 * MiB;
const BANDWIDTH_ROUNDS = 7;
const BANDWIDTH_REPS_PER_ROUND = 6;
const GEMM_SIZE = 512;
const STENCIL_WIDTH = 1024;
const STENCIL_HEIGHT = 1024;
const STENCIL_ITERATIONS = 10;
const STORE_BO_BYTES = 16 * MiB;
const STORES_PER_BATCH = 16384;
/** Batches between two takes of the dirty pages, as a primary shipping to a standby would. */
const BATCHES_PER_TAKE = 16;

type SessionRecord = Exclude<ReturnType<Backend["openSession"]>, Failure>;

/** The in-process benchmarks' backend: one tenant, limits far above what they use. */
export function benchBackendOptions(trackMmio: boolean): BackendOptions {
  return {
    device: { seed: 1, vramBytes: 4 * GiB, maxBoBytes: GiB, maxKernelWork: 2 ** 31 },
    tenants: new Map([[TENANT, { vramBytes: 4 * GiB, bos: 1_000_000 }]]),
    session: { replyCacheFrames: 4096, replyCacheBytes: 64 * MiB },
    maxDmaBytes: 64 * MiB,
    maxStoresPerBatch: 65536,
    trackMmio,
  };
}

function newBackend(trackMmio: boolean): Backend {
  return new Backend(benchBackendOptions(trackMmio));
}

/** One guest session driven in process: numbers frames and insists on success. */
class Guest {
  readonly backend: Backend;
  private readonly session: SessionRecord;
  private frameNumber = 0;
  readonly context: number;

  constructor(backend: Backend, id: string) {
    this.backend = backend;
    const session = backend.openSession(id, TENANT);
    if ("code" in session) throw new Error(`open session: ${session.message}`);
    this.session = session;
    this.context = this.handle({ op: "contextCreate" });
  }

  call(call: Call): CallResult {
    return this.expectOk(this.backend.applyFrame(this.session, this.frame({ kind: "call", call })));
  }

  stores(offsets: number[], widths: Uint8Array, data: Uint8Array, bo: number): void {
    const batch = { context: this.context, bo, offsets, widths, data };
    this.expectOk(this.backend.applyFrame(this.session, this.frame({ kind: "stores", batch })));
  }

  handle(call: Call): number {
    const output = this.call(call).output;
    if (output.kind !== "handle") throw new Error(`${call.op}: no handle in reply`);
    return output.handle;
  }

  alloc(sizeBytes: number): number {
    return this.handle({ op: "boAlloc", context: this.context, sizeBytes });
  }

  launch(kernel: string, args: readonly KernelArg[]): void {
    this.call({ op: "kernelLaunch", context: this.context, kernel, args });
  }

  /** The VRAM bytes of a buffer, for the memcpy baseline over the very same memory. */
  bytesOf(bo: number): Uint8Array {
    return this.backend.contexts.get(this.context)!.bos.get(bo)!.bo.bytes;
  }

  private frame(body: Parameters<Backend["applyFrame"]>[1]["body"]) {
    return { number: ++this.frameNumber, body };
  }

  private expectOk(outcome: ReturnType<Backend["applyFrame"]>): CallResult {
    const { result } = outcome;
    if (outcome.kind !== "applied" || result.code !== ErrorCode.OK) {
      throw new Error(`frame ${this.frameNumber} ${outcome.kind}: ${result.message}`);
    }
    return result;
  }
}

const buffer = (bo: number): KernelArg => ({ kind: "buffer", bo });
const u32 = (value: number): KernelArg => ({ kind: "u32", value });
const f32 = (value: number): KernelArg => ({ kind: "f32", value: Math.fround(value) });

/** fill, copy and memcpy of the same 64 MiB, interleaved round by round; GB/s medians. */
function bandwidth(guest: Guest) {
  const n = BANDWIDTH_BYTES / 4;
  const dst = guest.alloc(BANDWIDTH_BYTES);
  const src = guest.alloc(BANDWIDTH_BYTES);
  guest.launch("fill", [buffer(src), u32(n), u32(0x5a5a5a5a)]);
  guest.launch("fill", [buffer(dst), u32(n), u32(0)]);
  const srcBuffer = Buffer.from(guest.bytesOf(src).buffer);
  const dstBuffer = Buffer.from(guest.bytesOf(dst).buffer);
  const runs = {
    memcpy: () => srcBuffer.copy(dstBuffer),
    fill: () => guest.launch("fill", [buffer(dst), u32(n), u32(7)]),
    copy: () => guest.launch("copy", [buffer(dst), buffer(src), u32(n)]),
  };
  const gbps: Record<keyof typeof runs, number[]> = { memcpy: [], fill: [], copy: [] };
  for (let round = 0; round < BANDWIDTH_ROUNDS; round++) {
    for (const [name, run] of Object.entries(runs) as [keyof typeof runs, () => unknown][]) {
      const seconds = timeReps(BANDWIDTH_REPS_PER_ROUND, run);
      gbps[name].push((BANDWIDTH_BYTES * BANDWIDTH_REPS_PER_ROUND) / seconds / 1e9);
    }
  }
  return { memcpy: median(gbps.memcpy), fill: median(gbps.fill), copy: median(gbps.copy) };
}

/** Deterministic floats in [-1, 1) as bytes, for GEMM and stencil inputs. */
export function floats(count: number, seed: number): Uint8Array {
  const values = new Float32Array(count);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < count; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    values[i] = (x >>> 0) / 2 ** 31 - 1;
  }
  return new Uint8Array(values.buffer);
}

function upload(guest: Guest, bo: number, data: Uint8Array): void {
  guest.call({ op: "dmaWrite", context: guest.context, bo, offset: 0, data });
}

function gemmGflops(guest: Guest): number {
  const s = GEMM_SIZE;
  const bytes = s * s * 4;
  const [a, b, c] = [guest.alloc(bytes), guest.alloc(bytes), guest.alloc(bytes)];
  upload(guest, a, floats(s * s, 1));
  upload(guest, b, floats(s * s, 2));
  const args = [buffer(c), buffer(a), buffer(b), u32(s), u32(s), u32(s)];
  guest.launch("gemm_f32", args); // warm-up: lets the JIT optimise the inner loop
  const { reps, seconds } = repeatFor(2, 2, () => guest.launch("gemm_f32", args));
  return (2 * s * s * s * reps) / seconds / 1e9;
}

function stencilMcellsPerSecond(guest: Guest): number {
  const cells = STENCIL_WIDTH * STENCIL_HEIGHT;
  const [dst, src] = [guest.alloc(cells * 4), guest.alloc(cells * 4)];
  upload(guest, src, floats(cells, 3));
  const args = [
    buffer(dst),
    buffer(src),
    u32(STENCIL_WIDTH),
    u32(STENCIL_HEIGHT),
    u32(STENCIL_ITERATIONS),
    f32(0.2),
  ];
  guest.launch("stencil2d_f32", args);
  const { reps, seconds } = repeatFor(2, 2, () => guest.launch("stencil2d_f32", args));
  return (cells * STENCIL_ITERATIONS * reps) / seconds / 1e6;
}

/** Sequential 4-byte stores over a mapped buffer, batch by batch, with periodic dirty takes. */
function storeTrapPerSecond(guest: Guest): number {
  const bo = guest.alloc(STORE_BO_BYTES);
  guest.call({ op: "boMap", context: guest.context, bo });
  const batchBytes = STORES_PER_BATCH * 4;
  const batchCount = STORE_BO_BYTES / batchBytes;
  // Offsets as plain arrays: what the wire decoder hands the backend.
  const offsets = Array.from({ length: batchCount }, (_, b) =>
    Array.from({ length: STORES_PER_BATCH }, (_, i) => b * batchBytes + i * 4),
  );
  const widths = new Uint8Array(STORES_PER_BATCH).fill(4);
  const data = floats(STORES_PER_BATCH, 4);
  let next = 0;
  const oneBatch = () => {
    guest.stores(offsets[next % batchCount]!, widths, data, bo);
    next++;
    if (next % BATCHES_PER_TAKE === 0) guest.backend.takeDirtyPages();
  };
  repeatFor(0.3, BATCHES_PER_TAKE, oneBatch);
  next = 0;
  const { reps, seconds } = repeatFor(2, BATCHES_PER_TAKE, oneBatch);
  return (reps * STORES_PER_BATCH) / seconds;
}

function allocFreePerSecond(guest: Guest): number {
  const pair = () => {
    const bo = guest.alloc(4096);
    guest.call({ op: "boFree", context: guest.context, bo });
  };
  repeatFor(0.2, 1000, pair);
  const { reps, seconds } = repeatFor(1.5, 1000, pair);
  return reps / seconds;
}

export async function runGpuModel(): Promise<void> {
  const tracked = newBackend(true);
  const bw = bandwidth(new Guest(tracked, "bandwidth"));
  const gemm = gemmGflops(new Guest(tracked, "gemm"));
  const stencil = stencilMcellsPerSecond(new Guest(tracked, "stencil"));
  const storeTrap = storeTrapPerSecond(new Guest(tracked, "stores"));
  const storeUntracked = storeTrapPerSecond(new Guest(newBackend(false), "stores-untracked"));
  const allocFree = allocFreePerSecond(new Guest(tracked, "alloc"));
  const half = { kind: "atLeast", value: bw.memcpy / 2, note: "50% of memcpy" } as const;
  const metrics: Metric[] = [
    { name: "memcpy_gbps", value: bw.memcpy, unit: "GB/s" },
    { name: "fill_gbps", value: bw.fill, unit: "GB/s", target: half },
    { name: "copy_gbps", value: bw.copy, unit: "GB/s", target: half },
    { name: "fill_over_memcpy", value: bw.fill / bw.memcpy, unit: "ratio", target: atLeast(0.5) },
    { name: "copy_over_memcpy", value: bw.copy / bw.memcpy, unit: "ratio", target: atLeast(0.5) },
    {
      name: "gemm_gflops",
      value: gemm,
      unit: "GFLOP/s",
      target: { kind: "atLeast", value: 2.5, note: "issue #15" },
    },
    { name: "stencil_mcells_per_s", value: stencil, unit: "Mcell/s" },
    { name: "store_trap_per_s", value: storeTrap, unit: "stores/s", target: atLeast(10e6) },
    { name: "store_trap_untracked_per_s", value: storeUntracked, unit: "stores/s" },
    { name: "alloc_free_per_s", value: allocFree, unit: "pairs/s" },
  ];
  publish({
    name: "gpu-model",
    metrics,
    ratios: { fill_over_memcpy: bw.fill / bw.memcpy, copy_over_memcpy: bw.copy / bw.memcpy },
    notes: [
      `bandwidth: ${BANDWIDTH_BYTES / MiB} MiB buffers, median of ${BANDWIDTH_ROUNDS} interleaved rounds of ${BANDWIDTH_REPS_PER_ROUND} reps; memcpy = Buffer.copy between the same two buffers' VRAM`,
      `gemm_f32 ${GEMM_SIZE}x${GEMM_SIZE}x${GEMM_SIZE}; stencil2d_f32 ${STENCIL_WIDTH}x${STENCIL_HEIGHT}, ${STENCIL_ITERATIONS} iterations per launch`,
      `stores: sequential 4-byte stores into a ${STORE_BO_BYTES / MiB} MiB mapped buffer, ${STORES_PER_BATCH} per frame, takeDirtyPages every ${BATCHES_PER_TAKE} frames (store_trap_untracked: trackMmio off)`,
      "alloc_free: one boAlloc of 4 KiB and one boFree per pair, each an applied frame",
    ],
  });
}

const atLeast = (value: number) => ({ kind: "atLeast", value }) as const;
