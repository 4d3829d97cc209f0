// One command encoder's worth of device operations (those submitted in one event-loop turn):
// the commands, an upload arena for the bytes they need (pooled blocks filled on the CPU and
// written with queue.writeBuffer before submit), readback buffers (pooled) mapped after submit,
// and the temporaries destroyed once the GPU is done. Results are produced, in operation order,
// after that; then the pooled buffers go back to their pools (pools.ts).
import type { OpResult } from "@vgpu-ha/gpu-model";
import { type GpuContext, Usage } from "./gpu-context.js";
import { gridFor } from "./plan/grid.js";
import type { ReadbackBuffer, ReadbackPool, UploadBlock, UploadPool } from "./pools.js";
import type { ShaderName } from "./wgsl/index.js";
import { PARAM_BYTES, PARAM_GROUPS, PARAM_GX, PARAM_ONE, PARAM_WORDS } from "./wgsl/index.js";

/** Uniform and storage binding offsets must be multiples of this (WebGPU's minimum alignments). */
const BINDING_ALIGN_BYTES = 256;

/**
 * Each pipeline's bind group layout, asked of Dawn once: getBindGroupLayout makes a new native
 * object per call, garbage the collector must finalize (dawn-pacing.ts says what that costs).
 */
const layouts = new WeakMap<GPUComputePipeline, GPUBindGroupLayout>();

function layoutOf(pipeline: GPUComputePipeline): GPUBindGroupLayout {
  let layout = layouts.get(pipeline);
  if (layout === undefined) {
    layout = pipeline.getBindGroupLayout(0);
    layouts.set(pipeline, layout);
  }
  return layout;
}

/** The pools a batch takes its upload and readback buffers from. */
export interface BatchPools {
  readonly uploads: UploadPool;
  readonly readbacks: ReadbackPool;
}

/** Where an allocation in the upload arena landed. */
export interface UploadSlice {
  readonly buffer: GPUBuffer;
  readonly offset: number;
  readonly bytes: Uint8Array;
}

export interface Readback {
  readonly buffer: GPUBuffer;
  /** The mapped bytes, once the batch is done. */
  data(): Uint8Array;
}

export class Batch {
  readonly encoder: GPUCommandEncoder;
  readonly results: { index: number; produce: () => OpResult }[] = [];
  private readonly gpu: GpuContext;
  private readonly pools: BatchPools;
  private readonly blocks: UploadBlock[] = [];
  private readonly readbacks: ReadbackBuffer[] = [];
  private readonly temporaries: GPUBuffer[] = [];
  /** Run after submit: buffers freed by operations of this batch are destroyed then. */
  readonly afterSubmit: (() => void)[] = [];
  private pass: GPUComputePassEncoder | undefined;
  /** The operations after this one wait for this batch's results (a snapshot's page scan). */
  stall = false;

  constructor(gpu: GpuContext, pools: BatchPools) {
    this.gpu = gpu;
    this.pools = pools;
    this.encoder = gpu.device.createCommandEncoder();
  }

  get empty(): boolean {
    return this.results.length === 0;
  }

  /** `size` bytes of the upload arena at an offset that is `align`-aligned. */
  upload(size: number, align = 4): UploadSlice {
    let block = this.blocks[this.blocks.length - 1];
    const at = block ? Math.ceil(block.used / align) * align : 0;
    if (block === undefined || at + size > block.bytes.byteLength) {
      block = this.pools.uploads.take(size);
      this.blocks.push(block);
      return this.take(block, 0, size);
    }
    return this.take(block, at, size);
  }

  private take(block: UploadBlock, at: number, size: number): UploadSlice {
    block.used = at + size;
    return { buffer: block.buffer, offset: at, bytes: block.bytes.subarray(at, at + size) };
  }

  /** A scratch GPU buffer of at least `size` bytes, zero-filled, destroyed with the batch. */
  temporary(size: number): GPUBuffer {
    const buffer = this.gpu.device.createBuffer({
      size: Math.max(4, Math.ceil(size / 4) * 4),
      usage: Usage.STORAGE | Usage.COPY_SRC | Usage.COPY_DST,
    });
    this.temporaries.push(buffer);
    return buffer;
  }

  /** A GPU buffer like temporary() that the caller destroys (a snapshot's saved pages). */
  temporaryKept(size: number): GPUBuffer {
    return this.gpu.device.createBuffer({
      size: Math.max(4, Math.ceil(size / 4) * 4),
      usage: Usage.STORAGE | Usage.COPY_SRC | Usage.COPY_DST,
    });
  }

  /** Copies `size` bytes (all multiples of 4) between two different buffers, in order. */
  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, size: number) {
    if (size === 0) return;
    this.endPass();
    this.encoder.copyBufferToBuffer(src, srcOffset, dst, dstOffset, size);
  }

  /** Copies [offset, offset+size) (multiples of 4) of `src` into a buffer mapped after submit. */
  readback(src: GPUBuffer, offset: number, size: number): Readback {
    const target = this.mapTarget(size);
    this.copy(src, offset, target.buffer, 0, size);
    return target;
  }

  /** A buffer of `size` bytes (a multiple of 4) that commands copy into, mapped after submit. */
  mapTarget(size: number): Readback {
    const rb = this.pools.readbacks.take(size);
    this.readbacks.push(rb);
    const buffer = rb.buffer;
    return { buffer, data: () => new Uint8Array(buffer.getMappedRange(), 0, size) };
  }

  /**
   * One dispatch of pipeline `name` over `groups` workgroups: `scalars` are a0..a7 (u32 bits),
   * `buffers` bind from binding 1 on. Nothing is dispatched for zero groups.
   */
  dispatch(
    name: ShaderName,
    scalars: readonly number[],
    buffers: readonly GPUBuffer[],
    groups: number,
  ) {
    if (groups === 0) return;
    const grid = gridFor(groups, this.gpu.maxGroupsPerDimension);
    const params = this.upload(PARAM_BYTES, BINDING_ALIGN_BYTES);
    const words = new Uint32Array(PARAM_WORDS);
    for (let i = 0; i < scalars.length; i++) words[i] = scalars[i]! >>> 0;
    new Float32Array(words.buffer, PARAM_ONE * 4, 1)[0] = 1;
    words[PARAM_GX] = grid.x;
    words[PARAM_GROUPS] = grid.groups;
    params.bytes.set(new Uint8Array(words.buffer));
    this.bind(name, params, buffers, grid.x, grid.y);
  }

  private bind(
    name: ShaderName,
    params: UploadSlice,
    buffers: readonly GPUBuffer[],
    x: number,
    y: number,
  ) {
    const pipeline = this.gpu.pipelines.get(name)!;
    const entries: GPUBindGroupEntry[] = [
      { binding: 0, resource: { buffer: params.buffer, offset: params.offset, size: PARAM_BYTES } },
    ];
    for (const [i, buffer] of buffers.entries()) {
      entries.push({ binding: i + 1, resource: { buffer } });
    }
    const group = this.gpu.device.createBindGroup({ layout: layoutOf(pipeline), entries });
    this.pass ??= this.encoder.beginComputePass();
    this.pass.setPipeline(pipeline);
    this.pass.setBindGroup(0, group);
    this.pass.dispatchWorkgroups(x, y);
  }

  /** The upload block that holds `slice` as a storage buffer (for shaders that read records). */
  uploadBuffer(slice: UploadSlice): GPUBuffer {
    return slice.buffer;
  }

  private endPass(): void {
    this.pass?.end();
    this.pass = undefined;
  }

  /** Submits the commands; resolves once the GPU is done and every readback is mapped. */
  submit(): Promise<void> {
    this.endPass();
    for (const block of this.blocks) this.pools.uploads.flush(block);
    const queue = this.gpu.device.queue;
    queue.submit([this.encoder.finish()]);
    for (const run of this.afterSubmit) run();
    // A readback's map completes after the work before it: it alone says the batch is done.
    if (this.readbacks.length > 0) {
      return Promise.all(this.readbacks.map((rb) => this.pools.readbacks.map(rb))).then(
        () => undefined,
      );
    }
    return queue.onSubmittedWorkDone();
  }

  /** Gives back or destroys what the batch used (after its results were produced). */
  destroy(): void {
    for (const b of this.blocks) this.pools.uploads.give(b);
    for (const rb of this.readbacks) this.pools.readbacks.give(rb);
    for (const b of this.temporaries) b.destroy();
  }
}
