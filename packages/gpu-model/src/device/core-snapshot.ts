// A snapshot's reading side on the device (device-core.ts): it holds the buffers the snapshot
// covers (freed ones stay alive here until sent), keeps pages about to change before they were
// sent (copy-on-write, asked for by "preserve" ops queued before each write) and reads the
// next chunk's runs of non-zero pages, all-zero pages skipped. A chunk's runs are copied once,
// into one buffer laid out as their wire form (pages-wire.ts), so the main thread sends them
// without another copy. That buffer is shared memory, reused for a later chunk once the
// standby acknowledged this one (snapshot-source.ts: recycle): 1 MiB buffers made anew for
// every chunk drove the primary's main thread into a full garbage collection every ~32 MiB
// sent (V8 collects after each 64 MiB of new external memory), each a pause of the pull.
import {
  FieldWriter,
  lenBytes,
  PAGES_HEADROOM_BYTES,
  pagesMessageBytes,
} from "@vgpu-ha/common/core";
import type { ChunkPages, ChunkResult } from "./ops.js";
import { PAGE_SHIFT, PAGE_SIZE_BYTES } from "./vram.js";
import type { VramBuffer } from "./vram-buffer.js";

interface PendingBuffer {
  readonly context: number;
  readonly bo: number;
  readonly buffer: VramBuffer;
  /** The buffer's bytes as a Buffer (its pages are compared with zero in place). */
  readonly whole: Buffer;
  readonly pages: number;
  /** Pages below this index are sent. */
  nextPage: number;
  /** Pages saved before a write, not yet sent. */
  readonly saved: Map<number, Uint8Array>;
}

const ZERO_PAGE = Buffer.alloc(PAGE_SIZE_BYTES);
/**
 * A chunk's buffer holds maxBytes and this more (the room, run heads, a run's last page past
 * maxBytes), so that any later chunk fits in it when it is reused.
 */
const CHUNK_SLACK_BYTES = 4 * PAGE_SIZE_BYTES;

export class CoreSnapshot {
  private readonly pending: PendingBuffer[];
  private readonly byId = new Map<number, PendingBuffer>();
  private cursor = 0;
  private passedBytes = 0;

  constructor(buffers: readonly { context: number; bo: number; buffer: VramBuffer }[]) {
    this.pending = buffers.map((b) => ({
      ...b,
      whole: Buffer.from(b.buffer.bytes.buffer, b.buffer.bytes.byteOffset, b.buffer.byteLength),
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

  /** The next runs of non-zero pages, about maxBytes in all, in one buffer (their wire form). */
  chunk(maxBytes: number, into?: SharedArrayBuffer): ChunkResult {
    const runs: Run[] = [];
    let bytes = 0;
    while (bytes < maxBytes && this.cursor < this.pending.length) {
      const p = this.pending[this.cursor]!;
      const run = this.takeRun(p, maxBytes - bytes);
      if (run) {
        runs.push(run);
        bytes += run.dataBytes;
      }
      if (p.nextPage >= p.pages) {
        this.byId.delete(p.buffer.id);
        this.passedBytes += p.buffer.byteLength;
        this.cursor++;
      }
    }
    const { wire, pages } = layOut(runs, maxBytes, into);
    const current = this.pending[this.cursor];
    const coveredBytes = this.passedBytes + (current ? current.nextPage * PAGE_SIZE_BYTES : 0);
    return {
      pages,
      wire,
      coveredBytes,
      passedBuffers: this.cursor,
      last: this.cursor >= this.pending.length,
    };
  }

  /**
   * The next run of non-zero pages of `p`, at most maxBytes; advances p.nextPage. Its bytes
   * are views until layOut copies them: each stretch of live VRAM one view, each saved page
   * its own (one copy per stretch, not per page: the device thread reads the pull's pages).
   */
  private takeRun(p: PendingBuffer, maxBytes: number): Run | undefined {
    while (p.nextPage < p.pages && this.isZero(p, p.nextPage)) {
      p.saved.delete(p.nextPage);
      p.nextPage++;
    }
    if (p.nextPage >= p.pages) return undefined;
    const first = p.nextPage;
    const maxPages = Math.max(1, Math.floor(maxBytes / PAGE_SIZE_BYTES));
    let end = first + 1; // `first` is not zero
    while (end < p.pages && end - first < maxPages && !this.isZero(p, end)) end++;
    const views: Uint8Array[] = [];
    let live = first; // the stretch of live pages not yet in `views` starts here
    for (let page = first; page < end && p.saved.size > 0; page++) {
      const saved = p.saved.get(page);
      if (saved === undefined) continue;
      if (live < page) views.push(this.liveBytes(p, live, page));
      views.push(saved);
      p.saved.delete(page);
      live = page + 1;
    }
    if (live < end) views.push(this.liveBytes(p, live, end));
    p.nextPage = end;
    return {
      context: p.context,
      bo: p.bo,
      firstPage: first,
      dataBytes: (end - first) * PAGE_SIZE_BYTES,
      views,
    };
  }

  private liveBytes(p: PendingBuffer, firstPage: number, endPage: number): Uint8Array {
    return p.buffer.bytes.subarray(firstPage * PAGE_SIZE_BYTES, endPage * PAGE_SIZE_BYTES);
  }

  private isZero(p: PendingBuffer, page: number): boolean {
    const saved = p.saved.size > 0 ? p.saved.get(page) : undefined;
    if (saved !== undefined) {
      return ZERO_PAGE.equals(Buffer.from(saved.buffer, saved.byteOffset, saved.byteLength));
    }
    const at = page * PAGE_SIZE_BYTES;
    return p.whole.compare(ZERO_PAGE, 0, PAGE_SIZE_BYTES, at, at + PAGE_SIZE_BYTES) === 0;
  }
}

interface Run {
  readonly context: number;
  readonly bo: number;
  readonly firstPage: number;
  readonly dataBytes: number;
  /** The run's bytes in order: stretches of live VRAM and saved pages. */
  readonly views: readonly Uint8Array[];
}

/**
 * Copies between shared memories go a word at a time only when both ends are aligned to 8
 * bytes (V8's relaxed memcpy), else a byte at a time: measured 0.46-0.50 ms per MiB against
 * 0.16 aligned. VRAM pages are aligned; a run's data after its head (10-14 bytes) in the wire
 * form is not, unless the layout starts where it makes the first run's data aligned.
 */
const COPY_ALIGN_BYTES = 8;

/** The runs copied into one buffer as their wire form; the pages' data view into it. */
function layOut(
  runs: readonly Run[],
  maxBytes: number,
  into: SharedArrayBuffer | undefined,
): { wire: Uint8Array; pages: ChunkPages[] } {
  let size = PAGES_HEADROOM_BYTES;
  for (const r of runs) size += lenBytes(pagesMessageBytes(r));
  // The wire form starts `pad` bytes into the buffer: the first run's data lands aligned.
  const first = runs[0];
  const firstData =
    first === undefined
      ? 0
      : PAGES_HEADROOM_BYTES + lenBytes(pagesMessageBytes(first)) - first.dataBytes;
  const pad = (COPY_ALIGN_BYTES - (firstData % COPY_ALIGN_BYTES)) % COPY_ALIGN_BYTES;
  const memory =
    into !== undefined && into.byteLength >= pad + size
      ? into
      : new SharedArrayBuffer(Math.max(pad + size, maxBytes + CHUNK_SLACK_BYTES));
  const w = new FieldWriter(new Uint8Array(memory, pad, size), PAGES_HEADROOM_BYTES);
  const pages: ChunkPages[] = [];
  for (const r of runs) {
    w.pagesHead(r);
    const at = w.pos;
    for (const v of r.views) {
      w.buf.set(v, w.pos);
      w.pos += v.byteLength;
    }
    const data = w.buf.subarray(at, w.pos);
    pages.push({ context: r.context, bo: r.bo, firstPage: r.firstPage, data });
  }
  return { wire: w.buf, pages };
}
