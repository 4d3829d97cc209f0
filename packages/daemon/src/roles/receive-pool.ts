// Receive buffers for a pull's chunk frames (issue #15), reused instead of allocated per chunk:
// a fresh 1 MiB buffer costs the standby's main thread a minor page fault per 4 KiB page it
// first writes. A buffer taken here is moved to the device thread with the chunk's pages and
// given back only by Device.writePages' `returned` (the device has written it and moved it
// back, so no thread holds a view of it: a buffer is never reused while the device may read it).
// A buffer moved to another thread and back is a new ArrayBuffer object (the old one detached),
// so the pool cannot know its own by identity: it takes back buffers of its sizes, each once.

export interface ReceivePoolOptions {
  /** Buffers are whole multiples of this, so chunks of nearly one size share them. */
  readonly roundBytes: number;
  /** Frames below this size get a buffer of their own, never pooled. */
  readonly pooledFromBytes: number;
  /** At most this many bytes wait in the pool; more given back are dropped. */
  readonly freeBytesMax: number;
}

export const RECEIVE_POOL_DEFAULTS: ReceivePoolOptions = {
  roundBytes: 64 * 1024,
  pooledFromBytes: 64 * 1024,
  freeBytesMax: 64 * 1024 * 1024,
};

export class ReceivePool {
  private readonly options: ReceivePoolOptions;
  private free: ArrayBuffer[] = [];
  private freeBytes = 0;
  private closed = false;
  /** Buffers allocated (for tests and the bench's account). */
  allocated = 0;

  constructor(options: ReceivePoolOptions = RECEIVE_POOL_DEFAULTS) {
    this.options = options;
  }

  /** A view of `bytes` bytes, alone in its ArrayBuffer (a reused one when one fits). */
  take(bytes: number): Uint8Array {
    if (bytes < this.options.pooledFromBytes) return new Uint8Array(bytes);
    const size = Math.ceil(bytes / this.options.roundBytes) * this.options.roundBytes;
    const i = this.free.findIndex((b) => b.byteLength === size);
    let buffer: ArrayBuffer;
    if (i >= 0) {
      buffer = this.free[i]!;
      this.free.splice(i, 1);
      this.freeBytes -= size;
    } else {
      buffer = new ArrayBuffer(size);
      this.allocated++;
    }
    return new Uint8Array(buffer, 0, bytes);
  }

  /**
   * Buffers the device is done with (Device.writePages' `returned`). Ones of no pooled size,
   * detached ones (byteLength 0) and ones already waiting here are dropped.
   */
  give(buffers: readonly ArrayBuffer[]): void {
    const { roundBytes, pooledFromBytes, freeBytesMax } = this.options;
    for (const b of buffers) {
      if (this.closed || b.byteLength < pooledFromBytes || b.byteLength % roundBytes !== 0)
        continue;
      if (this.free.includes(b)) continue;
      if (this.freeBytes + b.byteLength > freeBytesMax) continue;
      this.free.push(b);
      this.freeBytes += b.byteLength;
    }
  }

  /** Buffers waiting for reuse. */
  get freeCount(): number {
    return this.free.length;
  }

  /** The pull ended: what waits is dropped, and what comes back later too. */
  close(): void {
    this.closed = true;
    this.free = [];
    this.freeBytes = 0;
  }
}
