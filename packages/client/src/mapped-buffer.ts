// A mapped buffer: the guest writes it like memory; each write is an MMIO store (width 1, 2,
// 4 or 8, naturally aligned) collected into store frames that keep their order relative to
// the session's calls. Errors of store frames surface at the next flush().
import { ErrorCode, type StoreBatch, VgpuError } from "@vgpu-ha/common";

/** What a mapped buffer needs of its session. */
export interface StoreSink {
  storeBatch(batch: StoreBatch): Promise<{ code: ErrorCode; message: string }>;
  storesPending(): void;
}

const STORES_PER_FRAME = 16384;

export class MappedBuffer {
  readonly context: number;
  readonly bo: number;
  readonly sizeBytes: number;
  private readonly sink: StoreSink;
  private offsets: number[] = [];
  private widths = new Uint8Array(STORES_PER_FRAME);
  private data = new Uint8Array(STORES_PER_FRAME * 8);
  private view = new DataView(this.data.buffer);
  private dataBytes = 0;
  private last: Promise<unknown> = Promise.resolve();
  private firstError: Error | undefined;

  constructor(sink: StoreSink, context: number, bo: number, sizeBytes: number) {
    this.sink = sink;
    this.context = context;
    this.bo = bo;
    this.sizeBytes = sizeBytes;
  }

  writeU8(offset: number, value: number): void {
    this.view.setUint8(this.slot(offset, 1), value);
  }

  writeU16(offset: number, value: number): void {
    this.view.setUint16(this.slot(offset, 2), value, true);
  }

  writeU32(offset: number, value: number): void {
    this.view.setUint32(this.slot(offset, 4), value, true);
  }

  writeU64(offset: number, value: bigint): void {
    this.view.setBigUint64(this.slot(offset, 8), value, true);
  }

  writeF32(offset: number, value: number): void {
    this.view.setFloat32(this.slot(offset, 4), value, true);
  }

  writeF64(offset: number, value: number): void {
    this.view.setFloat64(this.slot(offset, 8), value, true);
  }

  /** Stores not yet sent. */
  get pendingStores(): number {
    return this.offsets.length;
  }

  /** Reserves the next store's place; returns where its bytes go in `data`. */
  private slot(offset: number, width: number): number {
    if (this.offsets.length === STORES_PER_FRAME) this.emit();
    if (this.offsets.length === 0) this.sink.storesPending();
    const at = this.dataBytes;
    this.widths[this.offsets.length] = width;
    this.offsets.push(offset);
    this.dataBytes += width;
    return at;
  }

  /** Turns the pending stores into one frame (the session calls this before any call). */
  emit(): void {
    const count = this.offsets.length;
    if (count === 0) return;
    const batch: StoreBatch = {
      context: this.context,
      bo: this.bo,
      offsets: this.offsets,
      widths: this.widths.slice(0, count),
      data: this.data.slice(0, this.dataBytes),
    };
    this.offsets = [];
    this.dataBytes = 0;
    this.last = this.sink.storeBatch(batch).then(
      (r) => {
        if (r.code !== ErrorCode.OK) this.firstError ??= new VgpuError(r.code, r.message);
      },
      (e: Error) => {
        this.firstError ??= e;
      },
    );
  }

  /** Sends what is pending and waits until every store so far is applied; throws the first error. */
  async flush(): Promise<void> {
    this.emit();
    await this.last;
    const error = this.firstError;
    this.firstError = undefined;
    if (error) throw error;
  }
}
