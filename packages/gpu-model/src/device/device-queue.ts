// The main thread's side of the device (issue #14): numbers operations, hands them to an
// executor in order, routes each result to its callback and follows completion, implementing
// DeviceProgress (progress.ts) over it. Work is tagged with the seq named by beginSeq, so
// doneSeq can say which log entries' work is complete.
import Denque from "denque";
import type { DeviceExecutor, ExecutorSink } from "./executor.js";
import type { DeviceOp, OpResult } from "./ops.js";
import type { DeviceFailure, DeviceProgress } from "./progress.js";

type ResultCallback = (result: OpResult) => void;

/** Told each seq's first submit and each completion (common's seq trace; unset: nothing). */
type DeviceTrace = (stage: "dev.submit" | "dev.done", seq: number, outstanding: number) => void;
let trace: DeviceTrace | undefined;

/** Traces every device queue of this process (BENCH_SEQ_TRACE: the daemon sets it). */
export function traceDeviceQueues(t: DeviceTrace | undefined): void {
  trace = t;
}

export class DeviceQueue implements DeviceProgress, ExecutorSink {
  readonly executor: DeviceExecutor;
  private submitted = 0;
  private completed = 0;
  private seq = 0;
  /** Outstanding runs of operations of one seq: [first operation index, seq]. */
  private readonly seqRuns = new Denque<readonly [number, number]>();
  private readonly callbacks = new Map<number, ResultCallback>();
  /** afterDevice callbacks: [last operation they wait for, callback], in order. */
  private readonly waiters = new Denque<readonly [number, () => void]>();
  private readonly progressListeners = new Set<() => void>();
  private readonly failureListeners = new Set<(failure: DeviceFailure) => void>();
  private failureValue: DeviceFailure | undefined;
  /** Depth of submit() calls on the stack (an inline executor completes inside them). */
  private submitting = 0;

  constructor(executor: DeviceExecutor) {
    this.executor = executor;
    executor.attach(this);
  }

  /** Operations submitted and not yet complete. */
  get outstanding(): number {
    return this.submitted - this.completed;
  }

  /** Queues an operation; `onResult` gets its result on completion (never if the device fails). */
  submit(op: DeviceOp, onResult?: ResultCallback): void {
    if (this.failureValue !== undefined) return;
    const index = ++this.submitted;
    if (this.executor.synchronous !== true) {
      const lastRun = this.seqRuns.peekBack();
      if (lastRun === undefined || lastRun[1] !== this.seq) {
        this.seqRuns.push([index, this.seq]);
        trace?.("dev.submit", this.seq, this.outstanding);
      }
    }
    if (onResult !== undefined) this.callbacks.set(index, onResult);
    this.submitting++;
    try {
      this.executor.submit(index, op);
    } finally {
      this.submitting--;
    }
  }

  // ---- DeviceProgress ----

  beginSeq(seq: number): void {
    this.seq = seq;
  }

  doneSeq(lastSeq: number): number {
    const oldest = this.oldestOutstandingSeq();
    return oldest === undefined ? lastSeq : Math.max(0, Math.min(lastSeq, oldest - 1));
  }

  onProgress(listener: () => void): () => void {
    // A synchronous device completes within submit: its callers see the work done at once,
    // and a listener called per operation would only cost them (as InlineProgress: never).
    if (this.executor.synchronous === true) return () => {};
    this.progressListeners.add(listener);
    return () => this.progressListeners.delete(listener);
  }

  afterDevice(callback: () => void): void {
    if (this.completed === this.submitted) callback();
    else if (this.failureValue === undefined) this.waiters.push([this.submitted, callback]);
  }

  get failure(): DeviceFailure | undefined {
    return this.failureValue;
  }

  onFailure(listener: (failure: DeviceFailure) => void): () => void {
    this.failureListeners.add(listener);
    return () => this.failureListeners.delete(listener);
  }

  // ---- ExecutorSink ----

  complete(index: number, result: OpResult): void {
    this.completed = index;
    if (this.callbacks.size === 0) return;
    const callback = this.callbacks.get(index);
    if (callback !== undefined) {
      this.callbacks.delete(index);
      callback(result);
    }
  }

  progressed(): void {
    trace?.("dev.done", this.doneSeq(this.seq), this.outstanding);
    if (this.completed === this.submitted) {
      while (!this.seqRuns.isEmpty()) this.seqRuns.pop();
    }
    while (!this.waiters.isEmpty() && this.waiters.peekFront()![0] <= this.completed) {
      this.waiters.shift()![1]();
    }
    if (this.progressListeners.size === 0) return;
    // A device that completes inside submit (inline) tells no listener: the submitter is still
    // on the stack (a snapshot's next() mid-way, say) and sees the work done when it returns,
    // as with InlineProgress. Listeners hear of completions that come later.
    if (this.submitting > 0) return;
    for (const listener of this.progressListeners) listener();
  }

  failed(reason: string): void {
    if (this.failureValue !== undefined) return;
    this.failureValue = { reason, seq: this.oldestOutstandingSeq() ?? 0 };
    this.callbacks.clear();
    this.waiters.clear();
    for (const listener of this.failureListeners) listener(this.failureValue);
  }

  /** The seq of the oldest operation not complete; undefined when all are. */
  private oldestOutstandingSeq(): number | undefined {
    if (this.completed === this.submitted) return undefined;
    const next = this.completed + 1;
    while (this.seqRuns.length > 1 && this.seqRuns.peekAt(1)![0] <= next) this.seqRuns.shift();
    return this.seqRuns.peekFront()?.[1];
  }
}
