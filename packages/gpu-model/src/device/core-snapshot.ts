// A snapshot's reading side on the device (device-core.ts): it holds the buffers the snapshot
// covers (freed ones stay alive here until sent), keeps pages about to change before they were
// sent (copy-on-write, asked for by "preserve" ops queued before each write) and reads the
// next chunk's runs of non-zero pages, all-zero pages skipped.
import type { ChunkPages, ChunkResult } from "./ops.js";
import { PAGE_SHIFT, PAGE_SIZE_BYTES } from "./vram.js";
import type { VramBuffer } from "./vram-buffer.js";

interface PendingBuffer {
  readonly context: number;
  readonly bo: number;
  readonly buffer: VramBuffer;
  readonly pages: number;
  /** Pages below this index are sent. */
  nextPage: number;
  /** Pages saved before a write, not yet sent. */
  readonly saved: Map<number, Uint8Array>;
}

const ZERO_PAGE = Buffer.alloc(PAGE_SIZE_BYTES);

export class CoreSnapshot {
  private readonly pending: PendingBuffer[];
  private readonly byId = new Map<number, PendingBuffer>();
  private cursor = 0;
  private passedBytes = 0;

  constructor(buffers: readonly { context: number; bo: number; buffer: VramBuffer }[]) {
    this.pending = buffers.map((b) => ({
      ...b,
      pages: b.buffer.byteLength >>> PAGE_SHIFT,
      nextPage: 0,
      saved: new Map(),
    }));
    for (const p of this.pending) this.byId.set(p.buffer.id, p);
  }

  /** Saves the unsent, unsaved pages of [start, end) of buffer `id` before they change. */
  preserve(id: number, start: number, end: number): void {
    const p = this.byId.get(id);
    if (p === undefined) return;
    const first = Math.max(start >>> PAGE_SHIFT, p.nextPage);
    const last = Math.min((end - 1) >>> PAGE_SHIFT, p.pages - 1);
    for (let page = first; page <= last; page++) {
      if (p.saved.has(page)) continue;
      const at = page * PAGE_SIZE_BYTES;
      p.saved.set(page, p.buffer.bytes.slice(at, at + PAGE_SIZE_BYTES));
    }
  }

  /** The next runs of non-zero pages, about maxBytes in all. */
  chunk(maxBytes: number): ChunkResult {
    const pages: ChunkPages[] = [];
    let bytes = 0;
    while (bytes < maxBytes && this.cursor < this.pending.length) {
      const p = this.pending[this.cursor]!;
      const run = this.takeRun(p, maxBytes - bytes);
      if (run) {
        pages.push(run);
        bytes += run.data.byteLength;
      }
      if (p.nextPage >= p.pages) {
        this.byId.delete(p.buffer.id);
        this.passedBytes += p.buffer.byteLength;
        this.cursor++;
      }
    }
    const current = this.pending[this.cursor];
    const coveredBytes = this.passedBytes + (current ? current.nextPage * PAGE_SIZE_BYTES : 0);
    return {
      pages,
      coveredBytes,
      passedBuffers: this.cursor,
      last: this.cursor >= this.pending.length,
    };
  }

  /** The next run of non-zero pages of `p`, at most maxBytes; advances p.nextPage. */
  private takeRun(p: PendingBuffer, maxBytes: number): ChunkPages | undefined {
    while (p.nextPage < p.pages && this.isZero(p, p.nextPage)) {
      p.saved.delete(p.nextPage);
      p.nextPage++;
    }
    if (p.nextPage >= p.pages) return undefined;
    const first = p.nextPage;
    const maxPages = Math.max(1, Math.floor(maxBytes / PAGE_SIZE_BYTES));
    let end = first;
    while (end < p.pages && end - first < maxPages && !this.isZero(p, end)) end++;
    const data = new Uint8Array((end - first) * PAGE_SIZE_BYTES);
    for (let page = first; page < end; page++) {
      data.set(this.pageOf(p, page), (page - first) * PAGE_SIZE_BYTES);
      p.saved.delete(page);
    }
    p.nextPage = end;
    return { context: p.context, bo: p.bo, firstPage: first, data };
  }

  private pageOf(p: PendingBuffer, page: number): Uint8Array {
    const saved = p.saved.get(page);
    if (saved) return saved;
    const at = page * PAGE_SIZE_BYTES;
    return p.buffer.bytes.subarray(at, at + PAGE_SIZE_BYTES);
  }

  private isZero(p: PendingBuffer, page: number): boolean {
    const bytes = this.pageOf(p, page);
    return ZERO_PAGE.equals(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  }
}
