// The device as a simulated executor (issue #14): every entry named by beginSeq is a piece of
// work that completes after a random latency, in order, on the simulated clock. The backend
// still computes at once (the GPU model is synchronous); what this simulates is *when the rest
// of the node may know*: doneSeq, afterDevice and onProgress follow the simulated completions,
// so acks, releases, late results and promotions take the asynchronous paths.
import type { DeviceFailure, DeviceProgress } from "@vgpu-ha/gpu-model";
import type { SimRng } from "./rng.js";

export class SimDevice implements DeviceProgress {
  /** Seqs begun and not complete, oldest first, with what waits for each. */
  private readonly queue: { seq: number; after: (() => void)[] }[] = [];
  private begun = 0;
  private lastDoneAtMs = 0;
  private readonly listeners = new Set<() => void>();
  /** Set when the node holding it is gone: nothing more completes or is told. */
  dead = false;
  readonly failure: DeviceFailure | undefined = undefined;

  constructor(
    private readonly meanMs: number,
    private readonly rng: SimRng,
    private readonly nowMs: () => number,
    private readonly schedule: (atMs: number, complete: () => void) => void,
  ) {}

  beginSeq(seq: number): void {
    if (seq <= this.begun) return;
    this.begun = seq;
    if (this.meanMs === 0) return; // an instant device
    const atMs = Math.max(this.lastDoneAtMs, this.nowMs()) + this.rng.exponential(this.meanMs);
    this.lastDoneAtMs = atMs;
    this.queue.push({ seq, after: [] });
    this.schedule(atMs, () => this.complete());
  }

  doneSeq(lastSeq: number): number {
    const first = this.queue[0];
    return first === undefined ? lastSeq : Math.min(lastSeq, first.seq - 1);
  }

  /** Entries begun and not complete. */
  get outstanding(): number {
    return this.queue.length;
  }

  onProgress(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  afterDevice(callback: () => void): void {
    const last = this.queue.at(-1);
    if (last === undefined) callback();
    else last.after.push(callback);
  }

  onFailure(_listener: (failure: DeviceFailure) => void): () => void {
    return () => {};
  }

  private complete(): void {
    if (this.dead) return;
    const done = this.queue.shift()!;
    for (const cb of done.after) cb();
    for (const l of [...this.listeners]) l();
  }
}

/**
 * Puts `device` in place of a backend's progress. The simulator's own seam: the backend makes
 * an inline one, and a node's device thread will bring its own.
 */
export function attachDevice(backend: { readonly progress: DeviceProgress }, device: SimDevice) {
  Object.defineProperty(backend, "progress", { value: device, configurable: true });
}
