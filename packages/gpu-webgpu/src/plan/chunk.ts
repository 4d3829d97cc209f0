// Which pages a snapshot chunk sends: the same walk as the model's CoreSnapshot.chunk
// (gpu-model/src/device/core-snapshot.ts), over buffers whose page contents the GPU executor
// cannot read synchronously; it knows which pages are all zero (scanned on the GPU at
// snapBegin: a page keeps its snapshot bytes until sent, copy-on-write) and plans runs of the
// rest, which it then reads back. chunk.test.ts holds it against CoreSnapshot.
import { PAGE_SIZE_BYTES } from "@vgpu-ha/gpu-model";

export interface PlannedBuffer {
  readonly pages: number;
  /** Pages below this index are sent. */
  nextPage: number;
}

/** A run of non-zero pages [first, end) of buffer `buffer` (its index in the snapshot). */
export interface PlannedRun {
  readonly buffer: number;
  readonly first: number;
  readonly end: number;
}

export interface PlannedChunk {
  readonly runs: readonly PlannedRun[];
  readonly coveredBytes: number;
  readonly passedBuffers: number;
  readonly last: boolean;
}

export class ChunkPlanner<B extends PlannedBuffer> {
  readonly buffers: readonly B[];
  private cursor = 0;
  private passedBytes = 0;
  private readonly isZero: (buffer: B, page: number) => boolean;

  constructor(buffers: readonly B[], isZero: (buffer: B, page: number) => boolean) {
    this.buffers = buffers;
    this.isZero = isZero;
  }

  /** Buffers fully passed (sent or skipped). */
  get passed(): number {
    return this.cursor;
  }

  chunk(maxBytes: number): PlannedChunk {
    const runs: PlannedRun[] = [];
    let bytes = 0;
    while (bytes < maxBytes && this.cursor < this.buffers.length) {
      const b = this.buffers[this.cursor]!;
      const run = this.takeRun(b, maxBytes - bytes);
      if (run) {
        runs.push(run);
        bytes += (run.end - run.first) * PAGE_SIZE_BYTES;
      }
      if (b.nextPage >= b.pages) {
        this.passedBytes += b.pages * PAGE_SIZE_BYTES;
        this.cursor++;
      }
    }
    const current = this.buffers[this.cursor];
    return {
      runs,
      coveredBytes: this.passedBytes + (current ? current.nextPage * PAGE_SIZE_BYTES : 0),
      passedBuffers: this.cursor,
      last: this.cursor >= this.buffers.length,
    };
  }

  private takeRun(b: B, maxBytes: number): PlannedRun | undefined {
    while (b.nextPage < b.pages && this.isZero(b, b.nextPage)) b.nextPage++;
    if (b.nextPage >= b.pages) return undefined;
    const first = b.nextPage;
    const maxPages = Math.max(1, Math.floor(maxBytes / PAGE_SIZE_BYTES));
    let end = first;
    while (end < b.pages && end - first < maxPages && !this.isZero(b, end)) end++;
    b.nextPage = end;
    return { buffer: this.cursor, first, end };
  }
}
