// Rebuilds a backend from snapshot chunks on the receiving node: chunk 0 recreates contexts,
// buffers (on this node's own device, so its own device handles), sessions and counters;
// later chunks fill buffer pages (queued to the device, all or nothing per chunk; a chunk whose
// bytes are its own, pagesOwned, gives them to the device, which hands the buffers back to
// pagesReturn once written). Chunks must arrive in order. A pulled chunk's reader may instead
// put a run's bytes straight into the buffer as they come off the socket (place(): pages
// marked `placed`, nothing left to write), where the device's memory is this thread's to write
// (Device.hostBytes) and only while that chunk is the next one expected: nothing else writes
// a restoring replica's buffers, and what the device does with them later is submitted after.
import {
  ErrorCode,
  type PagesPlacement,
  type PagesRunHead,
  type SnapshotChunk,
} from "@vgpu-ha/common/core";
import { type Failure, fail } from "../device/failure.js";
import type { OpPageWrite } from "../device/ops.js";
import { PAGE_SIZE_BYTES } from "../device/vram.js";
import { Backend, type BackendOptions } from "../paravirt/backend.js";

export class SnapshotSink {
  readonly snapshotId: number;
  readonly atSeq: number;
  private backend: Backend | undefined;
  private expected = 0;
  private complete = false;
  private readonly options: BackendOptions;

  constructor(options: BackendOptions, first: { snapshotId: number; atSeq: number }) {
    this.options = options;
    this.snapshotId = first.snapshotId;
    this.atSeq = first.atSeq;
  }

  /** Chunks received so far (the next expected index). */
  get received(): number {
    return this.expected;
  }

  get done(): boolean {
    return this.complete;
  }

  /** The rebuilt backend, once the last chunk is in. */
  result(): Backend | undefined {
    return this.complete ? this.backend : undefined;
  }

  /** Abandons the copy: its device ends (a device thread stops). Not after result() was taken. */
  close(): void {
    this.backend?.close();
    this.backend = undefined;
  }

  /**
   * Where run `run` of chunk `chunk` may be read straight into the buffer it fills: its bytes
   * of the buffer's memory, live while that chunk is the next expected and the copy is not
   * abandoned. Undefined when it cannot (another chunk, a run that does not fit — accept()
   * then refuses it as ever —, a device whose memory is not this thread's).
   */
  place(
    chunk: { readonly snapshotId: number; readonly index: number },
    run: PagesRunHead,
  ): PagesPlacement | undefined {
    const backend = this.backend;
    if (backend === undefined || !this.expects(chunk) || run.bytes === 0) return undefined;
    const gbo = backend.contexts.get(run.context)?.bos.get(run.bo);
    const at = run.firstPage * PAGE_SIZE_BYTES;
    if (gbo === undefined || at + run.bytes > gbo.bo.byteLength) return undefined;
    const memory = backend.device.hostBytes(gbo.bo);
    if (memory === undefined || at + run.bytes > memory.byteLength) return undefined;
    return {
      into: memory.subarray(at, at + run.bytes),
      live: () => this.backend === backend && this.expects(chunk),
    };
  }

  private expects(chunk: { readonly snapshotId: number; readonly index: number }): boolean {
    return !this.complete && chunk.snapshotId === this.snapshotId && chunk.index === this.expected;
  }

  accept(chunk: SnapshotChunk): Failure | null {
    if (chunk.snapshotId !== this.snapshotId || chunk.index !== this.expected) {
      return fail(
        ErrorCode.MALFORMED,
        `snapshot chunk ${chunk.snapshotId}/${chunk.index} unexpected`,
      );
    }
    if (chunk.index === 0) {
      if (chunk.meta === undefined)
        return fail(ErrorCode.MALFORMED, "snapshot chunk 0 without meta");
      const built = Backend.restore(this.options, chunk.meta);
      if ("code" in built) return built;
      this.backend = built;
    } else {
      const backend = this.backend!;
      const writes: OpPageWrite[] = [];
      for (const run of chunk.pages) {
        const gbo = backend.contexts.get(run.context)?.bos.get(run.bo);
        const at = run.firstPage * PAGE_SIZE_BYTES;
        if (gbo === undefined || at + run.data.byteLength > gbo.bo.byteLength) {
          return fail(
            ErrorCode.MALFORMED,
            `snapshot pages for ${run.context}/${run.bo} do not fit`,
          );
        }
        if (run.placed !== true) writes.push({ id: gbo.bo.id, at, data: run.data });
        else if (!inPlace(backend.device.hostBytes(gbo.bo), at, run.data)) {
          return fail(
            ErrorCode.MALFORMED,
            `snapshot pages for ${run.context}/${run.bo} not placed`,
          );
        }
      }
      backend.device.writePages(writes, chunk.pagesOwned === true, chunk.pagesReturn);
    }
    this.expected++;
    if (chunk.last) this.complete = true;
    return null;
  }
}

/** Whether `data` is the bytes of `memory` from `at` (a run read there in place). */
function inPlace(memory: Uint8Array | undefined, at: number, data: Uint8Array): boolean {
  return (
    memory !== undefined &&
    data.buffer === memory.buffer &&
    data.byteOffset === memory.byteOffset + at
  );
}
