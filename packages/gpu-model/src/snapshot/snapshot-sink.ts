// Rebuilds a backend from snapshot chunks on the receiving node: chunk 0 recreates contexts,
// buffers (on this node's own device, so its own device handles), sessions and counters;
// later chunks fill buffer pages (queued to the device, all or nothing per chunk; a chunk whose
// bytes are its own, pagesOwned, gives them to the device, which hands the buffers back to
// pagesReturn once written). Chunks must arrive in order.
import { ErrorCode, type SnapshotChunk } from "@vgpu-ha/common/core";
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
        writes.push({ id: gbo.bo.id, at, data: run.data });
      }
      backend.device.writePages(writes, chunk.pagesOwned === true, chunk.pagesReturn);
    }
    this.expected++;
    if (chunk.last) this.complete = true;
    return null;
  }
}
