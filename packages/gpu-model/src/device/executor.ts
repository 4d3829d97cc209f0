// Where queued device operations run (issue #14). The queue (device-queue.ts) numbers the
// operations 1, 2, 3, … and submits them in order; an executor runs them in that order on a
// DeviceCore and reports each completion, with its result, back on the caller's thread.
//   InlineExecutor: runs each at submit (today's synchronous device; tests and tools);
//   ManualExecutor: holds them until told (tests, the simulator);
//   LatencyExecutor: completes each after a delay the caller picks, on the caller's timers;
//   WorkerExecutor (../worker/): a device thread; operations cross in batches.
import { DeviceCore } from "./device-core.js";
import type { DeviceOp, OpResult } from "./ops.js";
import type { VramBuffer } from "./vram-buffer.js";

/** How an executor reports back to its queue, always on the queue's thread. */
export interface ExecutorSink {
  /** Operation `index` completed (indexes complete in order). */
  complete(index: number, result: OpResult): void;
  /** A run of completions was reported: tell the listeners. */
  progressed(): void;
  /** The device could not finish its work; nothing completes after this. */
  failed(reason: string): void;
}

export interface DeviceExecutor {
  /** Every operation completes before submit returns (the queue then keeps no seq runs). */
  readonly synchronous?: boolean;
  /** Connects the queue; called once, before any submit. */
  attach(sink: ExecutorSink): void;
  /** Runs operation `index` after every earlier one. */
  submit(index: number, op: DeviceOp): void;
  /**
   * The live bytes of a buffer, for synchronous readers; only an executor whose core runs on
   * this thread has them, others throw.
   */
  peek(id: number): VramBuffer;
  /**
   * Buffers about to be filled (a restored snapshot's, in the order their pages come): an
   * executor whose memory is shared may touch their pages ahead of the writes, on another
   * thread, without changing a byte. Optional: the others leave the faults to the writes.
   */
  prefault?(ids: readonly number[]): void;
  /**
   * A buffer's memory as this thread may write it directly, ahead of the device's later work
   * on it (a pulled snapshot's pages read straight off the socket): only an executor whose
   * buffers exist here at once and whose later operations see what this thread wrote before
   * submitting them (InlineExecutor, WorkerExecutor's shared memory). Others: undefined.
   */
  hostBytes?(id: number): Uint8Array | undefined;
  /** Stops the device (a worker thread ends); submits after this are dropped. */
  close(): void;
}

/** Makes the executor of a new backend's device. */
export type ExecutorFactory = () => DeviceExecutor;

/** Runs every operation as it is submitted: complete before submit returns. */
export class InlineExecutor implements DeviceExecutor {
  readonly synchronous = true;
  readonly core = new DeviceCore();
  private sink: ExecutorSink | undefined;

  attach(sink: ExecutorSink): void {
    this.sink = sink;
  }

  submit(index: number, op: DeviceOp): void {
    const result = this.core.execute(op);
    this.sink!.complete(index, result);
    this.sink!.progressed();
  }

  peek(id: number): VramBuffer {
    return this.core.buffer(id);
  }

  hostBytes(id: number): Uint8Array | undefined {
    return this.core.has(id) ? this.core.buffer(id).bytes : undefined;
  }

  close(): void {}
}

/**
 * Holds operations until the caller runs them: `run(n)` runs the next n, `runAll()` all held.
 * Lets tests and the simulator put the device anywhere behind the paravirtual layer.
 */
export class ManualExecutor implements DeviceExecutor {
  readonly core = new DeviceCore();
  private sink: ExecutorSink | undefined;
  private readonly held: { index: number; op: DeviceOp }[] = [];
  private head = 0;
  private closed = false;

  attach(sink: ExecutorSink): void {
    this.sink = sink;
  }

  /** Operations submitted and not yet run. */
  get pending(): number {
    return this.held.length - this.head;
  }

  submit(index: number, op: DeviceOp): void {
    if (!this.closed) this.held.push({ index, op });
  }

  /** Runs the next `count` held operations (fewer if fewer are held); how many ran. */
  run(count = 1): number {
    let ran = 0;
    while (ran < count && this.head < this.held.length) {
      const { index, op } = this.held[this.head++]!;
      this.sink!.complete(index, this.core.execute(op));
      ran++;
    }
    if (this.head === this.held.length) {
      this.held.length = 0;
      this.head = 0;
    }
    if (ran > 0) this.sink!.progressed();
    return ran;
  }

  runAll(): number {
    return this.run(Number.POSITIVE_INFINITY);
  }

  /** Makes the device fail as a hung or dead device thread would. */
  fail(reason: string): void {
    this.close();
    this.sink!.failed(reason);
  }

  peek(id: number): VramBuffer {
    return this.core.buffer(id);
  }

  close(): void {
    this.closed = true;
    this.held.length = 0;
    this.head = 0;
  }
}

/** Schedules `run` after `delayMs` of the caller's clock (a simulator's timers, or real ones). */
export type ScheduleFn = (delayMs: number, run: () => void) => void;

/**
 * Completes each operation a caller-picked delay after the one before it completed (or after
 * its own submission, if later), in order: a device of random latency for simulators.
 */
export class LatencyExecutor implements DeviceExecutor {
  readonly core = new DeviceCore();
  private sink: ExecutorSink | undefined;
  private readonly schedule: ScheduleFn;
  private readonly delayMs: () => number;
  private readonly held: { index: number; op: DeviceOp }[] = [];
  private running = false;
  private closed = false;

  constructor(schedule: ScheduleFn, delayMs: () => number) {
    this.schedule = schedule;
    this.delayMs = delayMs;
  }

  attach(sink: ExecutorSink): void {
    this.sink = sink;
  }

  submit(index: number, op: DeviceOp): void {
    if (this.closed) return;
    this.held.push({ index, op });
    if (!this.running) this.next();
  }

  private next(): void {
    if (this.closed || this.held.length === 0) {
      this.running = false;
      return;
    }
    this.running = true;
    this.schedule(this.delayMs(), () => {
      if (this.closed) return;
      const { index, op } = this.held.shift()!;
      this.sink!.complete(index, this.core.execute(op));
      this.sink!.progressed();
      this.next();
    });
  }

  peek(id: number): VramBuffer {
    return this.core.buffer(id);
  }

  close(): void {
    this.closed = true;
    this.held.length = 0;
  }
}
