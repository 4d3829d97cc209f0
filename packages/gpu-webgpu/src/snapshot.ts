// A snapshot's reading side on the GPU (the model's is gpu-model/src/device/core-snapshot.ts).
// snapBegin scans every covered buffer's pages on the GPU (all zero or not) and holds the
// buffers; the executor waits for that scan before it encodes anything after it. A page keeps
// its snapshot bytes until sent: a "preserve" before each write copies the unsent pages it
// covers into a saved buffer, first save wins. snapChunk plans runs of non-zero pages with the
// model's walk (plan/chunk.ts) and reads each page from its saved copy or the live buffer.
import {
  type ChunkPages,
  type ChunkResult,
  type OpResult,
  PAGE_SIZE_BYTES,
} from "@vgpu-ha/gpu-model";
import type { Batch } from "./batch.js";
import type { GpuBufferEntry, GpuBuffers } from "./buffers.js";
import { ChunkPlanner, type PlannedBuffer } from "./plan/chunk.js";

const PAGE_SHIFT = 12;

interface SnapBuffer extends PlannedBuffer {
  readonly context: number;
  readonly bo: number;
  readonly entry: GpuBufferEntry;
  /** 1 where the page holds a non-zero byte; filled when the scan is read back. */
  nonZero: Uint32Array;
  readonly saved: Map<number, { gpu: GPUBuffer; offset: number }>;
}

export class GpuSnapshot {
  private readonly list: SnapBuffer[];
  private readonly byEntry = new Map<GpuBufferEntry, SnapBuffer>();
  private readonly planner: ChunkPlanner<SnapBuffer>;
  private readonly savedBuffers: GPUBuffer[] = [];
  private readonly buffers: GpuBuffers;
  private released = 0;

  constructor(
    buffers: GpuBuffers,
    covered: readonly { context: number; bo: number; entry: GpuBufferEntry }[],
  ) {
    this.buffers = buffers;
    this.list = covered.map((c) => ({
      ...c,
      pages: c.entry.size >>> PAGE_SHIFT,
      nextPage: 0,
      nonZero: new Uint32Array(0),
      saved: new Map(),
    }));
    for (const b of this.list) {
      buffers.hold(b.entry);
      this.byEntry.set(b.entry, b);
    }
    this.planner = new ChunkPlanner(this.list, (b, page) => b.nonZero[page] === 0);
  }

  /** Encodes the page scan; the returned function stores its result (called when done). */
  scan(batch: Batch): () => void {
    const total = this.list.reduce((sum, b) => sum + b.pages, 0);
    if (total === 0) return () => {};
    const flags = batch.temporary(total * 4);
    let first = 0;
    for (const b of this.list) {
      batch.dispatch("page_scan", [b.pages, first], [flags, b.entry.gpu], b.pages);
      first += b.pages;
    }
    const rb = batch.readback(flags, 0, total * 4);
    return () => {
      const all = new Uint32Array(rb.data().slice().buffer);
      let at = 0;
      for (const b of this.list) {
        b.nonZero = all.subarray(at, at + b.pages);
        at += b.pages;
      }
    };
  }

  preserve(batch: Batch, entry: GpuBufferEntry, start: number, end: number): void {
    const b = this.byEntry.get(entry);
    if (b === undefined) return;
    const first = Math.max(start >>> PAGE_SHIFT, b.nextPage);
    const last = Math.min((end - 1) >>> PAGE_SHIFT, b.pages - 1);
    let lo = -1;
    let hi = -1;
    for (let page = first; page <= last; page++) {
      if (b.saved.has(page)) continue;
      if (lo < 0) lo = page;
      hi = page;
    }
    if (lo < 0) return;
    const gpu = batch.temporaryKept((hi - lo + 1) * PAGE_SIZE_BYTES);
    this.savedBuffers.push(gpu);
    batch.copy(entry.gpu, lo * PAGE_SIZE_BYTES, gpu, 0, (hi - lo + 1) * PAGE_SIZE_BYTES);
    for (let page = lo; page <= hi; page++) {
      if (!b.saved.has(page)) b.saved.set(page, { gpu, offset: (page - lo) * PAGE_SIZE_BYTES });
    }
  }

  chunk(batch: Batch, maxBytes: number): () => OpResult {
    const planned = this.planner.chunk(maxBytes);
    const reads = planned.runs.map((run) => {
      const b = this.list[run.buffer]!;
      const size = (run.end - run.first) * PAGE_SIZE_BYTES;
      const rb = batch.mapTarget(size);
      const target = rb.buffer;
      for (let page = run.first; page < run.end; ) {
        const at = (page - run.first) * PAGE_SIZE_BYTES;
        const saved = b.saved.get(page);
        if (saved) {
          batch.copy(saved.gpu, saved.offset, target, at, PAGE_SIZE_BYTES);
          page++;
          continue;
        }
        let end = page + 1;
        while (end < run.end && !b.saved.has(end)) end++;
        batch.copy(b.entry.gpu, page * PAGE_SIZE_BYTES, target, at, (end - page) * PAGE_SIZE_BYTES);
        page = end;
      }
      return { b, run, rb };
    });
    for (; this.released < planned.passedBuffers; this.released++) {
      this.buffers.release(this.list[this.released]!.entry, batch);
    }
    return (): ChunkResult => ({
      pages: reads.map(
        ({ b, run, rb }): ChunkPages => ({
          context: b.context,
          bo: b.bo,
          firstPage: run.first,
          data: rb.data().slice(),
        }),
      ),
      coveredBytes: planned.coveredBytes,
      passedBuffers: planned.passedBuffers,
      last: planned.last,
    });
  }

  /** Releases the buffers not passed yet and the saved pages (after `batch` is submitted). */
  end(batch: Batch): void {
    for (; this.released < this.list.length; this.released++) {
      this.buffers.release(this.list[this.released]!.entry, batch);
    }
    const saved = this.savedBuffers.splice(0);
    batch.afterSubmit.push(() => {
      for (const gpu of saved) gpu.destroy();
    });
  }
}
