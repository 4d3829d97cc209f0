// The GPU device as the main thread holds it: VRAM accounting, contexts and buffer objects
// addressed by device handles, and the operations on them. Every operation is checked here and
// decided at once; the work on bytes is queued (device-queue.ts) to the device core, which runs
// it in order inline or on the device thread (executor.ts). Pure and deterministic: same seed
// and same calls ⇒ same handles and bytes. Callers (the paravirtual backend) translate guest
// handles before calling in.
import { ErrorCode, type StoreBatch } from "@vgpu-ha/common/core";
import { BufferObject } from "./buffer-object.js";
import { DeviceQueue } from "./device-queue.js";
import { type DeviceExecutor, InlineExecutor } from "./executor.js";
import { type Failure, fail, inRange, outOfBounds } from "./failure.js";
import { HandleGenerator } from "./handle-generator.js";
import { KERNELS } from "./kernels/index.js";
import type { ResolvedArg, SlotKind } from "./kernels/types.js";
import type { OpArg, OpPageWrite } from "./ops.js";
import { roundUpToPage, Vram } from "./vram.js";

export interface DeviceOptions {
  /** Seed of the device-handle generator; use different seeds on the two nodes. */
  readonly seed: number;
  readonly vramBytes: number;
  /** Largest single buffer; at most 1 GiB (one ArrayBuffer each). */
  readonly maxBoBytes: number;
  /** Largest work (kernel-defined units, about one per element operation) of one launch. */
  readonly maxKernelWork: number;
}

export class DeviceContext {
  readonly handle: number;
  readonly bos = new Map<number, BufferObject>();
  constructor(handle: number) {
    this.handle = handle;
  }
}

/** An argument of a launch after handle translation: a buffer or a scalar of a slot kind. */
export type DeviceArg =
  | { readonly kind: "buffer"; readonly bo: BufferObject }
  | { readonly kind: Exclude<SlotKind, "buffer">; readonly value: number };

export class Device {
  readonly options: DeviceOptions;
  readonly vram: Vram;
  /** The operations queued to the device core, and how far it got (the DeviceProgress). */
  readonly queue: DeviceQueue;
  private readonly contexts = new Map<number, DeviceContext>();
  private readonly handles: HandleGenerator;
  private readonly usedHandles = new Set<number>();
  private bufferCount = 0;

  constructor(options: DeviceOptions, executor: DeviceExecutor = new InlineExecutor()) {
    this.options = options;
    this.vram = new Vram(options.vramBytes);
    this.handles = new HandleGenerator(options.seed);
    this.queue = new DeviceQueue(executor);
  }

  /** Ends the device (its thread, if it has one). */
  close(): void {
    this.queue.executor.close();
  }

  get boCount(): number {
    return this.bufferCount;
  }

  get contextCount(): number {
    return this.contexts.size;
  }

  createContext(): DeviceContext {
    const ctx = new DeviceContext(this.newHandle());
    this.contexts.set(ctx.handle, ctx);
    return ctx;
  }

  context(handle: number): DeviceContext | undefined {
    return this.contexts.get(handle);
  }

  destroyContext(ctx: DeviceContext): void {
    for (const handle of [...ctx.bos.keys()]) this.freeBo(ctx, handle);
    this.contexts.delete(ctx.handle);
    this.usedHandles.delete(ctx.handle);
  }

  /** Checks an allocation size; the page-rounded size on success (which must fit the limit). */
  checkAllocSize(sizeBytes: number): Failure | number {
    if (
      !Number.isSafeInteger(sizeBytes) ||
      sizeBytes <= 0 ||
      roundUpToPage(sizeBytes) > this.options.maxBoBytes
    ) {
      return fail(
        ErrorCode.INVALID_SIZE,
        `size ${sizeBytes} must be 1..${this.options.maxBoBytes} bytes`,
      );
    }
    return roundUpToPage(sizeBytes);
  }

  allocBo(ctx: DeviceContext, sizeBytes: number): Failure | BufferObject {
    const size = this.checkAllocSize(sizeBytes);
    if (typeof size !== "number") return size;
    if (this.vram.reserve(size) === null) {
      return fail(
        ErrorCode.OUT_OF_MEMORY,
        `VRAM full: ${this.vram.usedBytes} of ${this.vram.totalBytes} bytes used, ${size} asked`,
      );
    }
    const executor = this.queue.executor;
    const bo = new BufferObject(this.newHandle(), size, (id) => executor.peek(id));
    this.queue.submit({ k: "alloc", id: bo.id, size });
    ctx.bos.set(bo.id, bo);
    this.bufferCount++;
    return bo;
  }

  freeBo(ctx: DeviceContext, handle: number): void {
    const bo = ctx.bos.get(handle);
    if (bo === undefined) return;
    ctx.bos.delete(handle);
    this.usedHandles.delete(handle);
    this.vram.release(bo.byteLength);
    this.bufferCount--;
    this.queue.submit({ k: "free", id: handle });
  }

  dmaWrite(bo: BufferObject, offset: number, data: Uint8Array): Failure | null {
    if (!inRange(offset, data.byteLength, bo.byteLength)) {
      return outOfBounds("dma write", offset, data.byteLength, bo.byteLength);
    }
    this.queue.submit({ k: "write", id: bo.id, offset, data });
    return null;
  }

  /**
   * A buffer of `length` bytes that the device fills with the buffer's bytes when it reaches
   * this read (a copy: VRAM keeps changing). Nobody may read it before then.
   */
  dmaRead(bo: BufferObject, offset: number, length: number): Failure | Uint8Array {
    if (!inRange(offset, length, bo.byteLength)) {
      return outOfBounds("dma read", offset, length, bo.byteLength);
    }
    let data: Uint8Array | undefined;
    this.queue.submit({ k: "read", id: bo.id, offset, length }, (bytes) => {
      if (data === undefined)
        data = bytes as Uint8Array; // completed at once (inline)
      else data.set(bytes as Uint8Array);
    });
    data ??= new Uint8Array(length);
    return data;
  }

  copy(
    src: BufferObject,
    srcOffset: number,
    dst: BufferObject,
    dstOffset: number,
    length: number,
  ): Failure | null {
    if (!inRange(srcOffset, length, src.byteLength)) {
      return outOfBounds("copy source", srcOffset, length, src.byteLength);
    }
    if (!inRange(dstOffset, length, dst.byteLength)) {
      return outOfBounds("copy destination", dstOffset, length, dst.byteLength);
    }
    this.queue.submit({ k: "copy", src: src.id, srcOffset, dst: dst.id, dstOffset, length });
    return null;
  }

  launch(kernelName: string, args: readonly DeviceArg[]): Failure | null {
    const kernel = KERNELS.get(kernelName);
    if (kernel === undefined) return fail(ErrorCode.UNKNOWN_KERNEL, `no kernel "${kernelName}"`);
    if (args.length !== kernel.slots.length) {
      return fail(
        ErrorCode.BAD_KERNEL_ARGS,
        `${kernelName} takes ${kernel.slots.length} arguments, got ${args.length}`,
      );
    }
    const resolved: ResolvedArg[] = [];
    const opArgs: OpArg[] = [];
    for (let i = 0; i < args.length; i++) {
      const slot = kernel.slots[i]!;
      const arg = args[i]!;
      if (arg.kind !== slot.kind) {
        return fail(
          ErrorCode.BAD_KERNEL_ARGS,
          `${kernelName} argument ${i} (${slot.name}) must be ${slot.kind}, got ${arg.kind}`,
        );
      }
      resolved.push(arg.kind === "buffer" ? arg.bo : arg.value);
      opArgs.push(arg.kind === "buffer" ? { buffer: arg.bo.id } : arg.value);
    }
    const rejection = kernel.validate(resolved);
    if (rejection !== null) {
      return fail(ErrorCode.BAD_KERNEL_ARGS, `${kernelName}: ${rejection.message}`);
    }
    const work = kernel.work(resolved);
    if (work > this.options.maxKernelWork) {
      return fail(
        ErrorCode.LIMIT_EXCEEDED,
        `${kernelName}: work ${work} above the per-launch limit ${this.options.maxKernelWork}`,
      );
    }
    this.queue.submit({ k: "launch", kernel: kernelName, args: opArgs });
    return null;
  }

  /** Queues a batch of MMIO stores the backend checked (call-checks.ts checkStores). */
  stores(bo: BufferObject, batch: StoreBatch): void {
    const { offsets, widths, data } = batch;
    this.queue.submit({ k: "stores", id: bo.id, offsets, widths, data });
  }

  /**
   * Queues byte ranges the caller checked against their buffers (page batches, snapshots);
   * `owned`: their bytes are given away (ops.ts), nobody reads them after. `returned`, with
   * owned: told the writes' buffers once the device has written them and holds no view of
   * them (a device thread moved them back), so the caller may reuse them; not told if the
   * device fails first or cannot give them back.
   */
  writePages(
    writes: readonly OpPageWrite[],
    owned = false,
    returned?: (buffers: readonly ArrayBuffer[]) => void,
  ): void {
    if (writes.length === 0) return;
    if (!owned) {
      this.queue.submit({ k: "pages", writes });
      return;
    }
    this.queue.submit(
      { k: "pages", writes, owned },
      returned === undefined
        ? undefined
        : (r) => {
            if (r !== undefined && "returned" in r && r.returned.length > 0) returned(r.returned);
          },
    );
  }

  /**
   * A buffer's memory for this thread to write a restored snapshot's pages into directly
   * (executor.ts hostBytes), or undefined where the executor has none (the bytes then go by
   * writePages).
   */
  hostBytes(bo: BufferObject): Uint8Array | undefined {
    return this.queue.executor.hostBytes?.(bo.id);
  }

  /**
   * Buffers a snapshot is about to fill, in the order their pages come: the executor may touch
   * their memory ahead of the writes (executor.ts prefault); no byte changes.
   */
  prefault(bos: readonly BufferObject[]): void {
    if (bos.length > 0) this.queue.executor.prefault?.(bos.map((b) => b.id));
  }

  /** Queues a flip of the bits of `mask` in byte `offset` (checked by the caller). */
  xorByte(bo: BufferObject, offset: number, mask: number): void {
    this.queue.submit({ k: "xor", id: bo.id, offset, mask });
  }

  /** One SHA-256 (hex) per buffer, of its bytes at this point of the device's order. */
  hashBuffers(bos: readonly BufferObject[], callback: (hashes: readonly string[]) => void): void {
    this.queue.submit({ k: "hash", ids: bos.map((b) => b.id) }, (r) =>
      callback(r as readonly string[]),
    );
  }

  private newHandle(): number {
    const handle = this.handles.next((h) => this.usedHandles.has(h));
    this.usedHandles.add(handle);
    return handle;
  }
}
