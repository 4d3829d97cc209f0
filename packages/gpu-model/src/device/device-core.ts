// The device core: owns every buffer's bytes and runs queued operations (ops.ts) in order. It
// never fails: the paravirtual layer checked every operation on the main thread before queuing
// it, so a failure here is a broken invariant. Runs inline or on the device thread.
import { createHash } from "node:crypto";
import { CoreSnapshot } from "./core-snapshot.js";
import { KERNELS } from "./kernels/index.js";
import type { ResolvedArg } from "./kernels/types.js";
import { type DeviceOp, type OpResult, ownedBuffersOf } from "./ops.js";
import { VramBuffer } from "./vram-buffer.js";

export interface DeviceCoreOptions {
  /** Called before every kernel run with its name (the device thread's test delay). */
  readonly beforeKernel?: (kernel: string) => void;
}

export class DeviceCore {
  private readonly buffers = new Map<number, VramBuffer>();
  private readonly snapshots = new Map<number, CoreSnapshot>();
  private readonly options: DeviceCoreOptions;

  constructor(options: DeviceCoreOptions = {}) {
    this.options = options;
  }

  has(id: number): boolean {
    return this.buffers.has(id);
  }

  /** The live bytes of a buffer (for the inline device's synchronous readers). */
  buffer(id: number): VramBuffer {
    const b = this.buffers.get(id);
    if (b === undefined) throw new Error(`invariant: device has no buffer ${id}`);
    return b;
  }

  execute(op: DeviceOp): OpResult {
    switch (op.k) {
      case "alloc":
        this.buffers.set(op.id, new VramBuffer(op.id, op.size, op.memory));
        return undefined;
      case "free":
        this.buffers.delete(op.id);
        return undefined;
      case "write":
        this.buffer(op.id).bytes.set(op.data, op.offset);
        return undefined;
      case "read":
        return this.buffer(op.id).bytes.slice(op.offset, op.offset + op.length);
      case "copy":
        this.copy(op.src, op.srcOffset, op.dst, op.dstOffset, op.length);
        return undefined;
      case "launch":
        this.launch(op.kernel, op.args);
        return undefined;
      case "stores":
        this.stores(op.id, op.offsets, op.widths, op.data);
        return undefined;
      case "pages":
        for (const w of op.writes) this.buffer(w.id).bytes.set(w.data, w.at);
        return op.owned === true ? { returned: ownedBuffersOf(op.writes) } : undefined;
      case "xor": {
        const bytes = this.buffer(op.id).bytes;
        bytes[op.offset] = (bytes[op.offset]! ^ op.mask) & 0xff;
        return undefined;
      }
      case "hash":
        return op.ids.map((id) => createHash("sha256").update(this.buffer(id).bytes).digest("hex"));
      default:
        return this.snapshotOp(op);
    }
  }

  private snapshotOp(op: DeviceOp & { k: "snapBegin" | "preserve" | "snapChunk" | "snapEnd" }) {
    switch (op.k) {
      case "snapBegin":
        this.snapshots.set(
          op.snap,
          new CoreSnapshot(op.buffers.map((b) => ({ ...b, buffer: this.buffer(b.id) }))),
        );
        return undefined;
      case "preserve":
        this.snapshots.get(op.snap)?.preserve(op.id, op.start, op.end);
        return undefined;
      case "snapChunk": {
        const snap = this.snapshots.get(op.snap);
        if (snap === undefined) throw new Error(`invariant: no snapshot ${op.snap} on the device`);
        return snap.chunk(op.maxBytes, op.into);
      }
      case "snapEnd":
        this.snapshots.delete(op.snap);
        return undefined;
    }
  }

  private copy(src: number, srcOffset: number, dst: number, dstOffset: number, length: number) {
    const from = this.buffer(src).bytes;
    if (src === dst) from.copyWithin(dstOffset, srcOffset, srcOffset + length);
    else this.buffer(dst).bytes.set(from.subarray(srcOffset, srcOffset + length), dstOffset);
  }

  private launch(name: string, args: readonly (number | { buffer: number })[]) {
    const kernel = KERNELS.get(name);
    if (kernel === undefined) throw new Error(`invariant: no kernel ${name} on the device`);
    const resolved: ResolvedArg[] = args.map((a) =>
      typeof a === "number" ? a : this.buffer(a.buffer),
    );
    this.options.beforeKernel?.(name);
    kernel.run(resolved);
  }

  private stores(id: number, offsets: ArrayLike<number>, widths: Uint8Array, data: Uint8Array) {
    const vram = this.buffer(id).bytes;
    let at = 0;
    for (let i = 0; i < offsets.length; i++) {
      const offset = offsets[i]!;
      const width = widths[i]!;
      for (let k = 0; k < width; k++) vram[offset + k] = data[at + k]!;
      at += width;
    }
  }
}
