// The device on a GPU through WebGPU (issue #17): every DeviceOp runs on GPU buffers, in
// order, with the CPU model's results bit for bit (kernel contract v2). Operations submitted in
// one event-loop turn are encoded into one command encoder and submitted together; each
// completes, in order, once the GPU has done its batch (onSubmittedWorkDone, and mapAsync for
// reads, hashes and snapshot chunks). A snapshot's begin waits for its page scan before later
// operations are encoded. A lost device, an uncaptured error or a failed batch fails the sink.
import { seqTraceOn, traceSeq } from "@vgpu-ha/common";
import type {
  DeviceExecutor,
  DeviceOp,
  ExecutorSink,
  OpResult,
  VramBuffer,
} from "@vgpu-ha/gpu-model";
import { Batch } from "./batch.js";
import { GpuBuffers } from "./buffers.js";
import { type LaunchArg, launch } from "./encode-launch.js";
import { copy, hash, patchBuffer, read, write } from "./encode-memory.js";
import type { GpuContext } from "./gpu-context.js";
import { storeRecords, xorRecord } from "./plan/bytes.js";
import { ReadbackPool, UploadPool } from "./pools.js";
import { GpuSnapshot } from "./snapshot.js";

export interface WebGpuExecutorOptions {
  /** Destroys the device on close (the executor owns it). */
  readonly ownsDevice?: boolean;
  /** The largest buffer in bytes (the device's binding limit). */
  readonly maxBufferBytes: number;
  /**
   * Wraps each batch in validation and out-of-memory error scopes (default true). Without
   * them an error still fails the executor, through the device's uncaptured-error event.
   */
  readonly errorScopes?: boolean;
}

export class WebGpuExecutor implements DeviceExecutor {
  readonly synchronous = false;
  private readonly gpu: GpuContext;
  private readonly options: WebGpuExecutorOptions;
  private readonly buffers: GpuBuffers;
  private readonly pools: { uploads: UploadPool; readbacks: ReadbackPool };
  private readonly snapshots = new Map<number, GpuSnapshot>();
  private sink: ExecutorSink | undefined;
  private pending: { index: number; op: DeviceOp }[] = [];
  private scheduled = false;
  /** A batch's results are awaited before more is encoded (a snapshot's page scan). */
  private stalled = false;
  private tail: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(gpu: GpuContext, options: WebGpuExecutorOptions) {
    this.gpu = gpu;
    this.options = options;
    this.buffers = new GpuBuffers(gpu.device, options.maxBufferBytes);
    this.pools = { uploads: new UploadPool(gpu.device), readbacks: new ReadbackPool(gpu.device) };
    gpu.device.lost.then((info) => this.fail(`GPU device lost: ${info.reason} ${info.message}`));
    gpu.device.onuncapturederror = (e) => this.fail(`GPU error: ${e.error.message}`);
  }

  attach(sink: ExecutorSink): void {
    this.sink = sink;
  }

  submit(index: number, op: DeviceOp): void {
    if (this.closed) return;
    this.pending.push({ index, op });
    if (!this.scheduled && !this.stalled) {
      this.scheduled = true;
      setImmediate(() => this.pump());
    }
  }

  peek(_id: number): VramBuffer {
    throw new Error("the device is a GPU: its bytes cannot be read synchronously");
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pending = [];
    this.buffers.destroyAll();
    this.pools.uploads.destroy();
    this.pools.readbacks.destroy();
    if (this.options.ownsDevice) this.gpu.device.destroy();
  }

  /** Encodes what is pending into one batch (up to a stall) and submits it. */
  private pump(): void {
    this.scheduled = false;
    if (this.closed || this.stalled || this.pending.length === 0) return;
    const batch = new Batch(this.gpu, this.pools);
    const device = this.gpu.device;
    const scoped = this.options.errorScopes !== false;
    if (scoped) {
      device.pushErrorScope("validation");
      device.pushErrorScope("out-of-memory");
    }
    let taken = 0;
    try {
      while (taken < this.pending.length && !batch.stall) {
        const { index, op } = this.pending[taken++]!;
        batch.results.push({ index, produce: this.encode(batch, op) });
      }
    } catch (e) {
      this.fail(`device operation could not be encoded: ${(e as Error).message}`);
      return;
    }
    this.pending = this.pending.slice(taken);
    if (seqTraceOn) traceSeq("gpu.submit", taken, this.pending.length);
    const done = batch.submit();
    const scopes = scoped
      ? Promise.all([device.popErrorScope(), device.popErrorScope()])
      : Promise.resolve([]);
    if (batch.stall) this.stalled = true;
    this.tail = this.tail
      .then(() => Promise.all([done, scopes]))
      .then(([, errors]) => {
        const error = errors.find((e) => e !== null);
        if (error) throw new Error(error.message);
        this.finish(batch);
      })
      .catch((e: Error) => this.fail(`GPU batch failed: ${e.message}`));
    if (this.pending.length > 0 && !this.stalled) this.pump();
  }

  private finish(batch: Batch): void {
    if (this.closed) return;
    if (seqTraceOn) traceSeq("gpu.done", batch.results.length);
    const results: [number, OpResult][] = batch.results.map((r) => [r.index, r.produce()]);
    batch.destroy();
    for (const [index, result] of results) this.sink!.complete(index, result);
    this.sink!.progressed();
    if (batch.stall) {
      this.stalled = false;
      this.pump();
    }
  }

  private fail(reason: string): void {
    if (this.closed) return;
    this.close();
    this.sink?.failed(reason);
  }

  /** Encodes one operation; returns what produces its result once the batch is done. */
  private encode(batch: Batch, op: DeviceOp): () => OpResult {
    const none = () => undefined;
    switch (op.k) {
      case "alloc":
        this.buffers.alloc(op.id, op.size);
        return none;
      case "free":
        this.buffers.free(op.id, batch);
        return none;
      case "write":
        write(batch, this.buffers.get(op.id), op.offset, op.data);
        return none;
      case "read":
        return read(batch, this.buffers.get(op.id), op.offset, op.length);
      case "copy":
        copy(
          batch,
          this.buffers.get(op.src),
          op.srcOffset,
          this.buffers.get(op.dst),
          op.dstOffset,
          op.length,
        );
        return none;
      case "launch": {
        const args: LaunchArg[] = op.args.map((a) =>
          typeof a === "number" ? a : this.buffers.get(a.buffer),
        );
        launch(batch, op.kernel, args);
        return none;
      }
      case "stores":
        patchBuffer(batch, this.buffers.get(op.id), storeRecords(op.offsets, op.widths, op.data));
        return none;
      case "pages":
        for (const w of op.writes) write(batch, this.buffers.get(w.id), w.at, w.data);
        return none;
      case "xor":
        patchBuffer(batch, this.buffers.get(op.id), [xorRecord(op.offset, op.mask)]);
        return none;
      case "hash":
        return hash(
          batch,
          op.ids.map((id) => this.buffers.get(id)),
        );
      default:
        return this.encodeSnapshot(batch, op);
    }
  }

  private encodeSnapshot(
    batch: Batch,
    op: DeviceOp & { k: "snapBegin" | "preserve" | "snapChunk" | "snapEnd" },
  ): () => OpResult {
    switch (op.k) {
      case "snapBegin": {
        const covered = op.buffers.map((b) => ({ ...b, entry: this.buffers.get(b.id) }));
        const snap = new GpuSnapshot(this.buffers, covered);
        this.snapshots.set(op.snap, snap);
        const store = snap.scan(batch);
        batch.stall = true;
        return () => {
          store();
          return undefined;
        };
      }
      case "preserve": {
        const entry = this.buffers.find(op.id);
        if (entry) this.snapshots.get(op.snap)?.preserve(batch, entry, op.start, op.end);
        return () => undefined;
      }
      case "snapChunk": {
        const snap = this.snapshots.get(op.snap);
        if (snap === undefined) throw new Error(`invariant: no snapshot ${op.snap} on the device`);
        return snap.chunk(batch, op.maxBytes);
      }
      case "snapEnd":
        this.snapshots.get(op.snap)?.end(batch);
        this.snapshots.delete(op.snap);
        return () => undefined;
    }
  }
}
