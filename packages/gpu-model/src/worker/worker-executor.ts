// The device on its own thread (issue #14): operations cross to a worker_threads thread that
// owns VRAM (device-worker.ts), one postMessage per event-loop turn with the operations
// submitted in that turn (their byte arrays copied once and moved, never cloned with the
// buffer they view); completions come back batched. A watchdog fails the device when one
// operation runs longer than maxCallMs, or when the thread dies.
//
// Buffers live in SharedArrayBuffers this side allocates: while the device thread is idle, a
// small copy of bytes (idle-inline.ts) runs here at submit, completing before submit returns,
// instead of paying a crossing. Order holds: it runs only when everything submitted before it
// has completed, and the device thread touches a buffer only for operations it was sent.
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import { DeviceCore } from "../device/device-core.js";
import type { DeviceExecutor, ExecutorFactory, ExecutorSink } from "../device/executor.js";
import { type DeviceOp, ownedBuffersOf } from "../device/ops.js";
import type { VramBuffer } from "../device/vram-buffer.js";
import { INLINE_MAX_BYTES, runsInline } from "./idle-inline.js";
import { PageToucher } from "./page-toucher.js";
import type { Completions, OpBatch, WorkerStart } from "./protocol.js";

/**
 * A restored snapshot's pages are touched ahead (prefault) only when the process may run on at
 * least this many cores: the toucher needs one beside the thread that writes the pages. A
 * pulled snapshot's pages are read off the socket straight into VRAM by the main thread
 * (snapshot-sink.ts place()), the device thread idle meanwhile: with 2 cores per node the
 * toucher made the 1 GiB pull 1.18-1.40 times as fast (docs/benchmarks.md, session 9). When
 * pages go by the device thread instead (PullSnapshot from an older primary), 2 cores were
 * 0.71-1.03 times (session 8: the toucher took CPU the main and device threads needed).
 */
export const PREFAULT_MIN_CORES = 2;

/** Arrays from this size are moved (transferred); smaller ones are cheaper to clone. */
const MOVE_FROM_BYTES = 16 * 1024;

export interface WorkerExecutorOptions {
  /** One operation running longer than this fails the device (device.maxCallMs). */
  readonly maxCallMs: number;
  /** The device thread sleeps this long before every kernel run (testing.kernelDelayMs). */
  readonly kernelDelayMs?: number;
  /** Only launches of this kernel are delayed (testing.kernelDelayOnly); absent: all. */
  readonly kernelDelayOnly?: string;
  /**
   * Small operations up to this many bytes run on the submitting thread while the device
   * thread is idle (idle-inline.ts); 0: every operation crosses. Default INLINE_MAX_BYTES.
   */
  readonly inlineMaxBytes?: number;
  /** Touch a restored snapshot's pages ahead from this many cores (PREFAULT_MIN_CORES). */
  readonly prefaultMinCores?: number;
}

/** The worker's entry: always the built JS (under vitest this module runs from src/). */
export function deviceWorkerUrl(): URL {
  const url = new URL("./device-worker.js", import.meta.url);
  return new URL(url.href.replace("/src/worker/", "/dist/worker/"));
}

export const workerExecutor =
  (options: WorkerExecutorOptions): ExecutorFactory =>
  () =>
    new WorkerExecutor(options);

export class WorkerExecutor implements DeviceExecutor {
  private readonly options: WorkerExecutorOptions;
  private readonly worker: Worker;
  private readonly watch = new Float64Array(new SharedArrayBuffer(16));
  /** The buffers as this thread sees them (their shared memory), for the work it runs itself. */
  private readonly mirror = new DeviceCore();
  private readonly inlineMaxBytes: number;
  private sink: ExecutorSink | undefined;
  private outgoing: DeviceOp[] = [];
  private transfer: ArrayBuffer[] = [];
  private firstOutgoing = 0;
  private scheduled = false;
  private submitted = 0;
  private completed = 0;
  private watchdog: ReturnType<typeof setInterval> | undefined;
  private closed = false;
  /** The thread touching a restored snapshot's pages ahead of its writes (prefault). */
  private toucher: PageToucher | undefined;
  /** Resolves once the device thread has exited. */
  readonly exited: Promise<number>;

  constructor(options: WorkerExecutorOptions) {
    this.options = options;
    this.inlineMaxBytes = options.inlineMaxBytes ?? INLINE_MAX_BYTES;
    const start: WorkerStart = {
      kernelDelayMs: options.kernelDelayMs ?? 0,
      ...(options.kernelDelayOnly !== undefined
        ? { kernelDelayOnly: options.kernelDelayOnly }
        : {}),
      watch: this.watch.buffer as SharedArrayBuffer,
    };
    this.worker = new Worker(deviceWorkerUrl(), { workerData: start });
    this.worker.unref();
    this.exited = new Promise((resolve) => this.worker.once("exit", resolve));
    this.worker.on("message", (m: Completions) => this.completions(m));
    this.worker.on("error", (e) => this.fail(`device thread failed: ${e.message}`));
    this.worker.on("exit", (code) => this.fail(`device thread exited (code ${code})`));
  }

  attach(sink: ExecutorSink): void {
    this.sink = sink;
  }

  submit(index: number, op: DeviceOp): void {
    if (this.closed) return;
    if (this.completed === this.submitted && runsInline(op, this.inlineMaxBytes)) {
      this.submitted = index;
      this.completed = index;
      this.sink!.complete(index, this.mirror.execute(op));
      this.sink!.progressed();
      return;
    }
    if (this.outgoing.length === 0) this.firstOutgoing = index;
    this.outgoing.push(this.movable(this.shared(op)));
    this.submitted = index;
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
    if (this.watchdog === undefined) {
      this.worker.ref(); // work outstanding: keep the process alive for it
      const everyMs = Math.max(1, Math.min(100, this.options.maxCallMs / 4));
      this.watchdog = setInterval(() => this.check(), everyMs);
    }
  }

  peek(_id: number): VramBuffer {
    throw new Error("the device runs on its own thread: its bytes cannot be read synchronously");
  }

  /**
   * A thread touches the buffers' pages (page-toucher.ts) while their writes come: the device
   * thread then writes into memory already mapped. Only with a core to spare (the process's
   * available cores, which taskset and cgroup limits lower, at least prefaultMinCores). The
   * buffers are in the mirror already (an alloc is executed here at submit). Called once per
   * snapshot restore; a later call stops the earlier toucher.
   */
  prefault(ids: readonly number[]): void {
    const minCores = this.options.prefaultMinCores ?? PREFAULT_MIN_CORES;
    if (this.closed || availableParallelism() < minCores) return;
    this.toucher?.stop();
    this.toucher = new PageToucher(
      ids.map((id) => this.mirror.buffer(id).bytes.buffer as SharedArrayBuffer),
    );
  }

  /**
   * A buffer's shared memory (its alloc ran here at submit): what this thread writes there
   * before submitting later operations on it, the device thread sees (they cross by
   * postMessage after the write).
   */
  hostBytes(id: number): Uint8Array | undefined {
    return this.closed || !this.mirror.has(id) ? undefined : this.mirror.buffer(id).bytes;
  }

  /** The toucher's pages touched once it ended; undefined if none was started (tests). */
  get prefaulted(): Promise<number> | undefined {
    return this.toucher?.done;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.toucher?.stop();
    this.stopWatchdog();
    void this.worker.terminate();
  }

  private flush(): void {
    this.scheduled = false;
    if (this.closed || this.outgoing.length === 0) return;
    const batch: OpBatch = { first: this.firstOutgoing, ops: this.outgoing };
    this.worker.postMessage(batch, [...new Set(this.transfer)]);
    this.outgoing = [];
    this.transfer = [];
  }

  private completions(m: Completions): void {
    if (this.closed) return;
    let r = 0;
    for (let index = this.completed + 1; index <= m.upTo; index++) {
      const next = m.results[r];
      if (next !== undefined && next[0] === index) {
        r++;
        this.sink!.complete(index, next[1]);
      } else {
        this.sink!.complete(index, undefined);
      }
    }
    this.completed = m.upTo;
    if (this.completed === this.submitted) this.stopWatchdog();
    this.sink!.progressed();
  }

  private check(): void {
    const running = this.watch[0]!;
    if (running <= this.completed) return;
    const ranMs = Date.now() - this.watch[1]!;
    if (ranMs > this.options.maxCallMs) {
      this.fail(`device operation ${running} ran ${ranMs} ms, above device.maxCallMs`);
    }
  }

  private fail(reason: string): void {
    if (this.closed) return;
    this.close();
    this.sink?.failed(reason);
  }

  private stopWatchdog(): void {
    if (this.watchdog !== undefined) clearInterval(this.watchdog);
    this.watchdog = undefined;
    this.worker.unref();
  }

  /** An alloc gets shared memory (seen here too); a free drops it here as well. */
  private shared(op: DeviceOp): DeviceOp {
    if (op.k === "alloc") {
      const withMemory = { ...op, memory: new SharedArrayBuffer(op.size) };
      this.mirror.execute(withMemory);
      return withMemory;
    }
    if (op.k === "free") this.mirror.execute(op);
    return op;
  }

  /** The operation with its byte arrays copied into buffers of their own, listed to move. */
  private movable(op: DeviceOp): DeviceOp {
    switch (op.k) {
      case "write":
        return { ...op, data: this.own(op.data) };
      case "stores":
        return {
          ...op,
          offsets: Float64Array.from(op.offsets),
          widths: this.own(op.widths),
          data: this.own(op.data),
        };
      case "pages":
        if (op.owned === true) return this.taken(op);
        return { k: "pages", writes: op.writes.map((w) => ({ ...w, data: this.own(w.data) })) };
      default:
        return op;
    }
  }

  /**
   * A copy in an ArrayBuffer of its own (a Node Buffer's slice() would share its pool), so the
   * message clones only these bytes; large ones are moved rather than cloned a second time.
   */
  private own(view: Uint8Array): Uint8Array {
    const copy = new Uint8Array(view);
    return copy.byteLength >= MOVE_FROM_BYTES ? this.moved(copy) : copy;
  }

  /**
   * Page writes whose bytes were given away (a pulled snapshot chunk): their buffers move to
   * the device thread as they are, each once, with no copy; it moves them back in the op's
   * completion (PagesReturned). Shared memory is never moved (it cannot be): such writes are
   * copied as any others, and the op is no longer owned (nothing comes back).
   */
  private taken(op: DeviceOp & { k: "pages" }): DeviceOp {
    const buffers = ownedBuffersOf(op.writes);
    if (buffers.length === 0) {
      return { k: "pages", writes: op.writes.map((x) => ({ ...x, data: this.own(x.data) })) };
    }
    for (const b of buffers) this.transfer.push(b);
    return op;
  }

  private moved<T extends Uint8Array | Float64Array>(array: T): T {
    this.transfer.push(array.buffer as ArrayBuffer);
    return array;
  }
}
