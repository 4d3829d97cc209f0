// The executor's buffers: one GPU buffer per device buffer id, zero-filled at creation (WebGPU
// guarantees it). A snapshot holds a buffer it has not sent yet: freeing it then only drops the
// id, and the GPU buffer goes once no snapshot holds it.
import type { Batch } from "./batch.js";
import { Usage } from "./gpu-context.js";

export interface GpuBufferEntry {
  readonly id: number;
  readonly gpu: GPUBuffer;
  /** The model's byte length (the GPU buffer is this rounded up to 4 bytes). */
  readonly size: number;
  /** Snapshots holding it. */
  refs: number;
  freed: boolean;
}

export class GpuBuffers {
  private readonly device: GPUDevice;
  private readonly live = new Map<number, GpuBufferEntry>();
  /** The largest buffer this device binds (maxStorageBufferBindingSize, maxBufferSize). */
  readonly maxBytes: number;

  constructor(device: GPUDevice, maxBytes: number) {
    this.device = device;
    this.maxBytes = maxBytes;
  }

  get(id: number): GpuBufferEntry {
    const entry = this.live.get(id);
    if (entry === undefined) throw new Error(`invariant: device has no buffer ${id}`);
    return entry;
  }

  /** The live buffer `id`, if any. */
  find(id: number): GpuBufferEntry | undefined {
    return this.live.get(id);
  }

  alloc(id: number, size: number): void {
    if (size > this.maxBytes) {
      throw new Error(
        `buffer ${id} of ${size} bytes exceeds this GPU's ${this.maxBytes}-byte bindings`,
      );
    }
    const gpu = this.device.createBuffer({
      label: `bo-${id}`,
      size: Math.max(4, Math.ceil(size / 4) * 4),
      usage: Usage.STORAGE | Usage.COPY_SRC | Usage.COPY_DST,
    });
    this.live.set(id, { id, gpu, size, refs: 0, freed: false });
  }

  /** Drops the id; the GPU buffer goes after `batch` is submitted unless a snapshot holds it. */
  free(id: number, batch: Batch): void {
    const entry = this.get(id);
    this.live.delete(id);
    entry.freed = true;
    if (entry.refs === 0) batch.afterSubmit.push(() => entry.gpu.destroy());
  }

  hold(entry: GpuBufferEntry): void {
    entry.refs++;
  }

  release(entry: GpuBufferEntry, batch: Batch): void {
    entry.refs--;
    if (entry.refs === 0 && entry.freed) batch.afterSubmit.push(() => entry.gpu.destroy());
  }

  destroyAll(): void {
    for (const entry of this.live.values()) entry.gpu.destroy();
    this.live.clear();
  }
}
