// Produces a consistent snapshot of a backend at one seq while the backend keeps serving:
// the metadata is captured at once; buffer pages are sent later, and any page about to be
// written before it was sent is copied first (copy-on-write through Backend.beforeWrite).
// Freed buffers keep their memory alive here until sent. All-zero pages are skipped.
import type { SnapshotChunk, SnapshotMeta, SnapshotPages } from "@vgpu-ha/common/core";
import { PAGE_SHIFT, PAGE_SIZE_BYTES } from "../device/vram.js";
import type { Backend, GuestBo } from "../paravirt/backend.js";

interface PendingBo {
  readonly context: number;
  readonly bo: number;
  readonly bytes: Uint8Array;
  readonly pages: number;
  /** Pages below this index are sent (or being sent). */
  nextPage: number;
  /** Pages saved before a write, not yet sent. */
  readonly saved: Map<number, Uint8Array>;
}

const ZERO_PAGE = Buffer.alloc(PAGE_SIZE_BYTES);

export class SnapshotSource {
  readonly snapshotId: number;
  readonly atSeq: number;
  readonly meta: SnapshotMeta;
  private readonly backend: Backend;
  private readonly chunkBytesMax: number;
  private readonly pending: PendingBo[] = [];
  private readonly byBuffer = new Map<Uint8Array, PendingBo>();
  private cursor = 0;
  private nextIndex = 0;
  private finished = false;
  /** Bytes copied by copy-on-write so far (what the snapshot cost the writers). */
  copiedBytes = 0;
  sentBytes = 0;
  /** Bytes of buffer space the snapshot covers (every buffer's size, zero pages included). */
  readonly totalBytes: number;
  /** Bytes of buffer space produced so far (sent or skipped as zero): progress toward totalBytes. */
  coveredBytes = 0;
  /** Sizes of the buffers the cursor has passed. */
  private passedBytes = 0;

  constructor(backend: Backend, snapshotId: number, atSeq: number, chunkBytesMax: number) {
    this.backend = backend;
    this.snapshotId = snapshotId;
    this.atSeq = atSeq;
    this.chunkBytesMax = Math.max(PAGE_SIZE_BYTES, chunkBytesMax);
    this.meta = exportMeta(backend);
    for (const ctx of [...backend.contexts.values()].sort((a, b) => a.handle - b.handle)) {
      for (const gbo of [...ctx.bos.values()].sort((a, b) => a.handle - b.handle)) {
        const p: PendingBo = {
          context: ctx.handle,
          bo: gbo.handle,
          bytes: gbo.bo.bytes,
          pages: gbo.bo.byteLength >>> PAGE_SHIFT,
          nextPage: 0,
          saved: new Map(),
        };
        this.pending.push(p);
        this.byBuffer.set(gbo.bo.bytes, p);
      }
    }
    this.totalBytes = this.pending.reduce((sum, p) => sum + p.bytes.byteLength, 0);
    backend.beforeWrite = (gbo, start, end) => this.beforeWrite(gbo, start, end);
  }

  get done(): boolean {
    return this.finished;
  }

  /** Stops copy-on-write; the snapshot is abandoned or complete. */
  release(): void {
    if (this.backend.beforeWrite !== undefined) this.backend.beforeWrite = undefined;
    this.pending.length = 0;
    this.byBuffer.clear();
  }

  private beforeWrite(gbo: GuestBo, start: number, end: number): void {
    const p = this.byBuffer.get(gbo.bo.bytes);
    if (p === undefined) return;
    const first = Math.max(start >>> PAGE_SHIFT, p.nextPage);
    const last = Math.min((end - 1) >>> PAGE_SHIFT, p.pages - 1);
    for (let page = first; page <= last; page++) {
      if (p.saved.has(page)) continue;
      const at = page * PAGE_SIZE_BYTES;
      p.saved.set(page, p.bytes.slice(at, at + PAGE_SIZE_BYTES));
      this.copiedBytes += PAGE_SIZE_BYTES;
    }
  }

  /** The next chunk, or undefined when everything was produced. */
  next(): SnapshotChunk | undefined {
    if (this.finished) return undefined;
    const index = this.nextIndex++;
    if (index === 0) {
      const last = this.pending.length === 0;
      if (last) this.finish();
      return {
        snapshotId: this.snapshotId,
        atSeq: this.atSeq,
        index,
        last,
        meta: this.meta,
        pages: [],
      };
    }
    const pages: SnapshotPages[] = [];
    let bytes = 0;
    while (bytes < this.chunkBytesMax && this.cursor < this.pending.length) {
      const p = this.pending[this.cursor]!;
      const run = this.takeRun(p, this.chunkBytesMax - bytes);
      if (run) {
        pages.push(run);
        bytes += run.data.byteLength;
      }
      if (p.nextPage >= p.pages) {
        this.byBuffer.delete(p.bytes);
        this.passedBytes += p.bytes.byteLength;
        this.cursor++;
      }
    }
    const current = this.pending[this.cursor];
    this.coveredBytes = this.passedBytes + (current ? current.nextPage * PAGE_SIZE_BYTES : 0);
    const last = this.cursor >= this.pending.length;
    if (last) this.finish();
    this.sentBytes += bytes;
    return { snapshotId: this.snapshotId, atSeq: this.atSeq, index, last, meta: undefined, pages };
  }

  /** The next run of non-zero pages of `p`, at most maxBytes; advances p.nextPage. */
  private takeRun(p: PendingBo, maxBytes: number): SnapshotPages | undefined {
    while (p.nextPage < p.pages && this.isZero(p, p.nextPage)) p.nextPage++;
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

  private pageOf(p: PendingBo, page: number): Uint8Array {
    const saved = p.saved.get(page);
    if (saved) return saved;
    const at = page * PAGE_SIZE_BYTES;
    return p.bytes.subarray(at, at + PAGE_SIZE_BYTES);
  }

  private isZero(p: PendingBo, page: number): boolean {
    const bytes = this.pageOf(p, page);
    return ZERO_PAGE.equals(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  }

  private finish(): void {
    this.finished = true;
    this.release();
  }
}

export function exportMeta(backend: Backend): SnapshotMeta {
  const contexts = [...backend.contexts.values()]
    .sort((a, b) => a.handle - b.handle)
    .map((ctx) => ({
      handle: ctx.handle,
      tenant: ctx.tenant,
      sessionId: ctx.sessionId,
      nextBoHandle: ctx.nextBoHandle,
      fenceValue: ctx.fenceValue,
      bos: [...ctx.bos.values()]
        .sort((a, b) => a.handle - b.handle)
        .map((g) => ({ handle: g.handle, sizeBytes: g.bo.byteLength, mapped: g.bo.mapped })),
    }));
  const sessions = [...backend.sessions.values()]
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .map((s) => ({
      sessionId: s.id,
      tenant: s.tenant,
      lastFrame: s.lastFrame,
      replies: [...s.replies].map(([frame, result]) => ({ frame, result })),
    }));
  return { nextContextHandle: backend.nextContextHandle, contexts, sessions };
}
