// GPU buffers the executor reuses from batch to batch instead of creating and destroying them
// per batch (issue #17, the small-call latency): upload blocks, filled on the CPU and written
// with queue.writeBuffer just before the batch's submit, and mappable readback buffers by
// size class. A buffer goes back to its pool only once the batch that used it is done (its
// results were produced), so the GPU never reads or writes a buffer another batch is using.
import { MAP_READ_MODE, Usage } from "./gpu-context.js";

/** Pooled upload blocks are this big; a larger upload gets a buffer of its own. */
export const UPLOAD_BLOCK_BYTES = 64 << 10;
/** Upload blocks kept for reuse, at most. */
const UPLOAD_POOL_MAX = 32;
/** The smallest readback size class, in bytes. */
const READBACK_MIN_BYTES = 256;
/** Readbacks above this many bytes are not pooled (snapshot chunks of many MiB). */
const READBACK_POOLED_MAX_BYTES = 1 << 20;
/** Readback buffers kept per size class, at most. */
const READBACK_PER_CLASS_MAX = 8;

export interface UploadBlock {
  readonly buffer: GPUBuffer;
  /** The block's bytes on the CPU; written to the GPU buffer at submit. */
  readonly bytes: Uint8Array;
  used: number;
  /** A pooled block (else it is destroyed after its batch). */
  readonly pooled: boolean;
}

export class UploadPool {
  private readonly device: GPUDevice;
  private readonly free: UploadBlock[] = [];

  constructor(device: GPUDevice) {
    this.device = device;
  }

  /** A block of at least `size` bytes, empty. */
  take(size: number): UploadBlock {
    if (size <= UPLOAD_BLOCK_BYTES) {
      const block = this.free.pop();
      if (block !== undefined) {
        block.used = 0;
        return block;
      }
    }
    const pooled = size <= UPLOAD_BLOCK_BYTES;
    const bytesLength = pooled ? UPLOAD_BLOCK_BYTES : Math.ceil(size / 4) * 4;
    const buffer = this.device.createBuffer({
      size: bytesLength,
      usage: Usage.UNIFORM | Usage.STORAGE | Usage.COPY_SRC | Usage.COPY_DST,
    });
    return { buffer, bytes: new Uint8Array(bytesLength), used: 0, pooled };
  }

  /** Writes the used bytes of `block` to its GPU buffer (queue order: before the next submit). */
  flush(block: UploadBlock): void {
    const size = Math.ceil(block.used / 4) * 4;
    if (size > 0) this.device.queue.writeBuffer(block.buffer, 0, block.bytes, 0, size);
  }

  /** Gives `block` back after its batch is done. */
  give(block: UploadBlock): void {
    if (block.pooled && this.free.length < UPLOAD_POOL_MAX) this.free.push(block);
    else block.buffer.destroy();
  }

  destroy(): void {
    for (const block of this.free.splice(0)) block.buffer.destroy();
  }
}

/** A mappable buffer that commands copy into; mapped after submit, read, then given back. */
export interface ReadbackBuffer {
  readonly buffer: GPUBuffer;
  /** The size class (the buffer's size), or 0 when not pooled. */
  readonly sizeClass: number;
}

export class ReadbackPool {
  private readonly device: GPUDevice;
  private readonly free = new Map<number, GPUBuffer[]>();

  constructor(device: GPUDevice) {
    this.device = device;
  }

  /** A MAP_READ | COPY_DST buffer of at least `size` bytes (a multiple of 4). */
  take(size: number): ReadbackBuffer {
    const sizeClass = readbackClass(size);
    if (sizeClass === 0) {
      const buffer = this.device.createBuffer({
        size: Math.max(4, size),
        usage: Usage.MAP_READ | Usage.COPY_DST,
      });
      return { buffer, sizeClass };
    }
    const buffer =
      this.free.get(sizeClass)?.pop() ??
      this.device.createBuffer({ size: sizeClass, usage: Usage.MAP_READ | Usage.COPY_DST });
    return { buffer, sizeClass };
  }

  /** Maps `rb` for reading (after the submit of the commands that fill it). */
  map(rb: ReadbackBuffer): Promise<undefined> {
    return rb.buffer.mapAsync(MAP_READ_MODE);
  }

  /** Gives `rb` back once its bytes were copied out. */
  give(rb: ReadbackBuffer): void {
    const list = this.free.get(rb.sizeClass);
    if (rb.sizeClass === 0 || rb.buffer.mapState === "pending") {
      rb.buffer.destroy();
      return;
    }
    if (rb.buffer.mapState === "mapped") rb.buffer.unmap();
    if (list === undefined) this.free.set(rb.sizeClass, [rb.buffer]);
    else if (list.length < READBACK_PER_CLASS_MAX) list.push(rb.buffer);
    else rb.buffer.destroy();
  }

  destroy(): void {
    for (const list of this.free.values()) for (const b of list.splice(0)) b.destroy();
    this.free.clear();
  }
}

/** The pooled size of a readback of `size` bytes: a power of two ≥ 256, or 0 (not pooled). */
export function readbackClass(size: number): number {
  if (size > READBACK_POOLED_MAX_BYTES) return 0;
  let c = READBACK_MIN_BYTES;
  while (c < size) c *= 2;
  return c;
}
