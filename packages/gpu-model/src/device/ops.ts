// The operations the paravirtual layer queues to the device (issue #14): every piece of work on
// VRAM bytes, already checked on the main thread, so the device runs them in order and never
// fails. Plain data (numbers, strings, typed arrays), so a batch can cross to a worker thread.
// Buffers are named by their device handle (unique on a device while the buffer lives).

/** A launch argument: a buffer by device handle, or a scalar already checked for its slot. */
export type OpArg = { readonly buffer: number } | number;

/** One page range of a buffer written with bytes (MMIO page batches, snapshot loads). */
export interface OpPageWrite {
  readonly id: number;
  /** Byte offset in the buffer. */
  readonly at: number;
  readonly data: Uint8Array;
}

/** A buffer a snapshot covers, in the order its pages are sent. */
export interface OpSnapshotBuffer {
  readonly context: number;
  readonly bo: number;
  readonly id: number;
}

export type DeviceOp =
  /** `memory`: the buffer's bytes, shared with the thread that submitted it; absent: new ones. */
  | {
      readonly k: "alloc";
      readonly id: number;
      readonly size: number;
      readonly memory?: SharedArrayBuffer;
    }
  | { readonly k: "free"; readonly id: number }
  | { readonly k: "write"; readonly id: number; readonly offset: number; readonly data: Uint8Array }
  | { readonly k: "read"; readonly id: number; readonly offset: number; readonly length: number }
  | {
      readonly k: "copy";
      readonly src: number;
      readonly srcOffset: number;
      readonly dst: number;
      readonly dstOffset: number;
      readonly length: number;
    }
  | { readonly k: "launch"; readonly kernel: string; readonly args: readonly OpArg[] }
  | {
      readonly k: "stores";
      readonly id: number;
      readonly offsets: ArrayLike<number>;
      readonly widths: Uint8Array;
      readonly data: Uint8Array;
    }
  /**
   * `owned`: the writes' bytes are the caller's to give away (a pulled snapshot chunk's receive
   * buffer): a device thread may take their buffers instead of a copy, and answers them back
   * (PagesReturned) once written, for the caller to reuse.
   */
  | { readonly k: "pages"; readonly writes: readonly OpPageWrite[]; readonly owned?: boolean }
  /** Flips the bits of `mask` in one byte (the operator's divergence drill). */
  | { readonly k: "xor"; readonly id: number; readonly offset: number; readonly mask: number }
  | {
      readonly k: "snapBegin";
      readonly snap: number;
      readonly buffers: readonly OpSnapshotBuffer[];
    }
  /** Copy-on-write: keep the snapshot's unsent pages of [start, end) before they change. */
  | {
      readonly k: "preserve";
      readonly snap: number;
      readonly id: number;
      readonly start: number;
      readonly end: number;
    }
  | {
      readonly k: "snapChunk";
      readonly snap: number;
      readonly maxBytes: number;
      /**
       * Shared memory of an acknowledged chunk to lay this one out in (snapshot-source.ts:
       * recycle); absent, or too small: the device allocates a new one.
       */
      readonly into?: SharedArrayBuffer;
    }
  | { readonly k: "snapEnd"; readonly snap: number }
  | { readonly k: "hash"; readonly ids: readonly number[] };

/** A run of a snapshot's pages as the device read them. */
export interface ChunkPages {
  readonly context: number;
  readonly bo: number;
  readonly firstPage: number;
  readonly data: Uint8Array;
}

/** What a snapChunk op answers. */
export interface ChunkResult {
  /** Each run's data (views into `wire` when there is one). */
  readonly pages: readonly ChunkPages[];
  /**
   * The runs in their wire form after PAGES_HEADROOM_BYTES of room (common's pages-wire.ts),
   * as the model's device answers; absent from a device that reads pages otherwise.
   */
  readonly wire?: Uint8Array;
  /** Buffer bytes produced so far (sent or skipped as zero). */
  readonly coveredBytes: number;
  /** Buffers the snapshot has passed (no page of them is pending any more). */
  readonly passedBuffers: number;
  readonly last: boolean;
}

/**
 * What an owned pages op answers: the writes' buffers, each once, after every byte was written
 * (a device thread moves them back; it keeps no view of them).
 */
export interface PagesReturned {
  readonly returned: readonly ArrayBuffer[];
}

/**
 * read: the bytes; hash: one SHA-256 hex per id; snapChunk: the chunk; owned pages: their
 * buffers; others: nothing.
 */
export type OpResult = Uint8Array | readonly string[] | ChunkResult | PagesReturned | undefined;

/** An owned pages op's buffers, each once; none if any write views shared memory. */
export function ownedBuffersOf(writes: readonly OpPageWrite[]): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>();
  for (const w of writes) {
    if (!(w.data.buffer instanceof ArrayBuffer)) return [];
    buffers.add(w.data.buffer);
  }
  return [...buffers];
}
