// Produces a consistent snapshot of a backend at one seq while the backend keeps serving:
// the metadata is captured at once; buffer pages are read later by the device, in its order
// (device/core-snapshot.ts), and any page about to be written before it was sent is kept first
// (copy-on-write: Backend.beforeWrite queues a "preserve" before the write). Freed buffers stay
// alive on the device until sent. All-zero pages are skipped.
//
// Chunks come from the device: `ready()` says whether `next()` has one now (always, with the
// inline device); otherwise `onChunkReady` is called when one arrives. `nextChunk(cb)` is the
// same as a callback.
import { invariant, type SnapshotChunk, type SnapshotMeta } from "@vgpu-ha/common/core";
import type { BufferObject } from "../device/buffer-object.js";
import type { ChunkResult } from "../device/ops.js";
import { PAGE_SIZE_BYTES } from "../device/vram.js";
import type { Backend, GuestBo } from "../paravirt/backend.js";

/**
 * Chunks asked of the device ahead of the reader. Each is a round trip to the device thread:
 * with 2 the snapshot pull waited on them (the standby pulls up to snapshotWindowChunks, 16,
 * at once). With 8, once the standby read pages in place, the pull waited on the primary's
 * device read for 31 % of a 1 GiB pull (a chunk asked → arrived in 4 ms, median); 16 made the
 * pull 1.17 times as fast in 3 runs of 3 (docs/benchmarks.md, session 9). It holds at most 16
 * chunks (16 MiB at the default size).
 */
export const READ_AHEAD = 16;
/** Spare chunk buffers kept: the read-ahead's, twice over. */
const SPARE_MAX = 2 * READ_AHEAD;

export class SnapshotSource {
  readonly snapshotId: number;
  readonly atSeq: number;
  readonly meta: SnapshotMeta;
  private readonly backend: Backend;
  private readonly chunkBytesMax: number;
  /** The buffers covered, in sending order; those before `passed` are fully sent. */
  private readonly buffers: BufferObject[] = [];
  private readonly unsent = new Set<BufferObject>();
  private passed = 0;
  private readonly arrived: ChunkResult[] = [];
  private asked = 0;
  /** Shared buffers of acknowledged chunks, for the device to reuse (recycle). */
  private readonly spare: SharedArrayBuffer[] = [];
  /** Chunks asked and answered since the start (their indexes, for the trace). */
  private askedTotal = 0;
  private arrivedTotal = 0;
  /** The device answered the last chunk. */
  private lastArrived = false;
  private submitting = false;
  private nextIndex = 0;
  private finished = false;
  private released = false;
  private waiting: ((chunk: SnapshotChunk | undefined) => void) | undefined;
  /**
   * The metadata (chunk 0) holds the session tables' cached replies, and a dmaRead's reply
   * data is filled by the device: chunk 0 is ready once the device has done everything
   * submitted before the snapshot began.
   */
  private metaReady = false;
  /** Called when a chunk the reader waits for arrives from the device (never synchronously). */
  onChunkReady: (() => void) | undefined;
  /** Told when each chunk is asked of the device and when it arrives (common's snapshot-trace). */
  trace: ((stage: string, index: number) => void) | undefined;
  sentBytes = 0;
  /** Bytes of buffer space the snapshot covers (every buffer's size, zero pages included). */
  readonly totalBytes: number;
  /** Bytes of buffer space produced so far (sent or skipped as zero): progress toward totalBytes. */
  coveredBytes = 0;

  constructor(backend: Backend, snapshotId: number, atSeq: number, chunkBytesMax: number) {
    this.backend = backend;
    this.snapshotId = snapshotId;
    this.atSeq = atSeq;
    this.chunkBytesMax = Math.max(PAGE_SIZE_BYTES, chunkBytesMax);
    this.meta = exportMeta(backend);
    backend.progress.afterDevice(() => {
      this.metaReady = true;
      const waiting = this.waiting;
      if (waiting !== undefined && this.nextIndex === 0 && !this.released) {
        this.waiting = undefined;
        waiting(this.next());
      }
    });
    const list = [];
    for (const ctx of [...backend.contexts.values()].sort((a, b) => a.handle - b.handle)) {
      for (const gbo of [...ctx.bos.values()].sort((a, b) => a.handle - b.handle)) {
        list.push({ context: ctx.handle, bo: gbo.handle, id: gbo.bo.id });
        this.buffers.push(gbo.bo);
        this.unsent.add(gbo.bo);
      }
    }
    this.totalBytes = this.buffers.reduce((sum, b) => sum + b.byteLength, 0);
    if (list.length > 0) {
      backend.device.queue.submit({ k: "snapBegin", snap: snapshotId, buffers: list });
    }
    backend.beforeWrite = (gbo, start, end) => this.beforeWrite(gbo, start, end);
  }

  get done(): boolean {
    return this.finished;
  }

  /**
   * A chunk the standby acknowledged (the Sender holds it no longer, and what wrote it to a
   * stream has sent it): its shared buffer lays out a later chunk, so the main thread does not
   * take in 1 MiB of new memory per chunk (core-snapshot.ts says why that matters).
   */
  recycle(chunk: SnapshotChunk): void {
    const memory = chunk.pagesWire?.buffer;
    if (memory instanceof SharedArrayBuffer && this.spare.length < SPARE_MAX) {
      this.spare.push(memory);
    }
  }

  /** Stops copy-on-write; the snapshot is abandoned or complete. */
  release(): void {
    if (this.released) return;
    this.released = true;
    if (this.backend.beforeWrite !== undefined) this.backend.beforeWrite = undefined;
    if (this.buffers.length > 0) {
      this.backend.device.queue.submit({ k: "snapEnd", snap: this.snapshotId });
    }
    this.unsent.clear();
    this.waiting = undefined;
  }

  private beforeWrite(gbo: GuestBo, start: number, end: number): void {
    if (!this.unsent.has(gbo.bo)) return;
    const op = { k: "preserve", snap: this.snapshotId, id: gbo.bo.id, start, end } as const;
    this.backend.device.queue.submit(op);
  }

  /** True when next() has a chunk now (or the snapshot is finished); else one is on its way. */
  ready(): boolean {
    if (this.nextIndex === 0) return this.metaReady;
    if (this.finished || this.arrived.length > 0) return true;
    this.askAhead();
    return this.arrived.length > 0;
  }

  /** Calls `callback` with the next chunk (undefined when finished) once it is ready. */
  nextChunk(callback: (chunk: SnapshotChunk | undefined) => void): void {
    if (this.ready()) callback(this.next());
    else this.waiting = callback;
  }

  /** The next chunk, or undefined when everything was produced. Only when ready(). */
  next(): SnapshotChunk | undefined {
    if (this.finished) return undefined;
    const index = this.nextIndex++;
    if (index === 0) {
      const last = this.buffers.length === 0;
      if (last) this.finish();
      else this.askAhead();
      return {
        snapshotId: this.snapshotId,
        atSeq: this.atSeq,
        index,
        last,
        meta: this.meta,
        pages: [],
      };
    }
    const r = this.arrived.shift();
    invariant(r !== undefined, "SnapshotSource.next() before ready()");
    this.coveredBytes = r.coveredBytes;
    for (; this.passed < r.passedBuffers; this.passed++) {
      this.unsent.delete(this.buffers[this.passed]!);
    }
    let bytes = 0;
    for (const run of r.pages) bytes += run.data.byteLength;
    this.sentBytes += bytes;
    if (r.last) this.finish();
    else this.askAhead();
    return {
      snapshotId: this.snapshotId,
      atSeq: this.atSeq,
      index,
      last: r.last,
      meta: undefined,
      pages: r.pages.map((p) => ({ ...p })),
      ...(r.wire !== undefined ? { pagesWire: r.wire } : {}),
    };
  }

  /** Asks the device for chunks up to the read-ahead, one after another in its order. */
  private askAhead(): void {
    while (!this.lastArrived && !this.released && this.asked + this.arrived.length < READ_AHEAD) {
      this.asked++;
      this.trace?.("p.asked", ++this.askedTotal);
      const into = this.spare.pop();
      const op = {
        k: "snapChunk",
        snap: this.snapshotId,
        maxBytes: this.chunkBytesMax,
        ...(into !== undefined ? { into } : {}),
      } as const;
      this.submitting = true;
      this.backend.device.queue.submit(op, (result) => this.arrive(result as ChunkResult));
      this.submitting = false;
    }
  }

  private arrive(result: ChunkResult): void {
    this.asked--;
    // After the last chunk the device answers empty last chunks to what was asked ahead.
    if (this.released || this.lastArrived) return;
    if (result.last) this.lastArrived = true;
    this.trace?.("p.arrived", ++this.arrivedTotal);
    this.arrived.push(result);
    if (this.submitting) return; // the inline device: the reader has it at once
    const waiting = this.waiting;
    if (waiting !== undefined) {
      this.waiting = undefined;
      waiting(this.next());
    } else {
      this.onChunkReady?.();
    }
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
