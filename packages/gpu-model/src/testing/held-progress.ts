// A device for tests of what follows the device (acks, releases, late results, promotion): the
// backend computes at once as always, but its work counts as complete only when the test says
// so (complete()). Put in place of a backend's progress with holdDevice().
import type { DeviceFailure, DeviceProgress } from "../device/progress.js";

export class HeldProgress implements DeviceProgress {
  /** Seqs begun and not complete, oldest first, with the callbacks waiting for each. */
  private readonly queue: { seq: number; after: (() => void)[] }[] = [];
  private begun = 0;
  private readonly listeners = new Set<() => void>();
  readonly failure: DeviceFailure | undefined = undefined;

  beginSeq(seq: number): void {
    if (seq <= this.begun) return;
    this.begun = seq;
    this.queue.push({ seq, after: [] });
  }

  doneSeq(lastSeq: number): number {
    const first = this.queue[0];
    return first === undefined ? lastSeq : Math.min(lastSeq, first.seq - 1);
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

  /** Seqs begun and not complete. */
  get outstanding(): number {
    return this.queue.length;
  }

  /** Completes the work of every begun seq up to `seq` (all by default), in order. */
  complete(seq = Number.POSITIVE_INFINITY): void {
    while (this.queue.length > 0 && this.queue[0]!.seq <= seq) {
      for (const cb of this.queue.shift()!.after) cb();
    }
    for (const l of [...this.listeners]) l();
  }
}

/** Puts a HeldProgress in place of `backend.progress` and returns it. */
export function holdDevice(backend: { readonly progress: DeviceProgress }): HeldProgress {
  const held = new HeldProgress();
  Object.defineProperty(backend, "progress", { value: held, configurable: true });
  return held;
}
