// What crosses between the main thread and the device thread (worker-executor.ts,
// device-worker.ts): batches of numbered operations one way, batches of completions back.
import type { DeviceOp, OpResult } from "../device/ops.js";

export interface WorkerStart {
  /** The device thread sleeps this long before every kernel run (testing.kernelDelayMs). */
  readonly kernelDelayMs: number;
  /** Only launches of this kernel are delayed (testing.kernelDelayOnly); absent: all. */
  readonly kernelDelayOnly?: string;
  /** [index of the operation running (0: none), when it started (ms since the epoch)]. */
  readonly watch: SharedArrayBuffer;
}

/** Operations first, first+1, … in order. */
export interface OpBatch {
  readonly first: number;
  readonly ops: readonly DeviceOp[];
}

/** Every operation up to `upTo` completed; the results of those that have one. */
export interface Completions {
  readonly upTo: number;
  readonly results: readonly (readonly [number, OpResult])[];
}

/** The buffers of typed arrays an operation or a result owns alone, to move instead of copy. */
export function transferablesOf(value: OpResult): ArrayBuffer[] {
  if (value instanceof Uint8Array) return [value.buffer as ArrayBuffer];
  // An owned pages op's buffers go back to the main thread (for reuse), not copied.
  if (value !== undefined && "returned" in value) return [...value.returned];
  if (value !== undefined && "pages" in value) {
    // Each buffer once (a transfer list naming one twice is refused): the pages view one wire.
    // Shared memory (the model's chunks) is shared, not moved.
    const buffers = value.wire ? [value.wire] : value.pages.map((p) => p.data);
    const owned = buffers.map((b) => b.buffer).filter((b) => b instanceof ArrayBuffer);
    return [...new Set(owned)];
  }
  return [];
}
