// A consistent snapshot of a backend at one seq, as domain types: chunk 0 carries the
// metadata (contexts, handle tables, sessions, counters), later chunks carry buffer pages.
import type { CallResult } from "../calls.js";

export interface SnapshotBo {
  readonly handle: number;
  readonly sizeBytes: number;
  readonly mapped: boolean;
}

export interface SnapshotContext {
  readonly handle: number;
  readonly tenant: string;
  readonly sessionId: string;
  readonly nextBoHandle: number;
  readonly fenceValue: number;
  readonly bos: readonly SnapshotBo[];
}

export interface SnapshotSession {
  readonly sessionId: string;
  readonly tenant: string;
  readonly lastFrame: number;
  readonly replies: readonly { readonly frame: number; readonly result: CallResult }[];
}

export interface SnapshotMeta {
  readonly nextContextHandle: number;
  readonly contexts: readonly SnapshotContext[];
  readonly sessions: readonly SnapshotSession[];
}

/** Consecutive non-zero pages of one buffer. */
export interface SnapshotPages {
  readonly context: number;
  readonly bo: number;
  readonly firstPage: number;
  readonly data: Uint8Array;
}

export interface SnapshotChunk {
  readonly snapshotId: number;
  readonly atSeq: number;
  readonly index: number;
  readonly last: boolean;
  readonly meta: SnapshotMeta | undefined;
  readonly pages: readonly SnapshotPages[];
  /**
   * The pages in their wire form, when the device laid them out so (pages-wire.ts):
   * PAGES_HEADROOM_BYTES of room, then the pages fields; each `pages[i].data` views into it.
   */
  readonly pagesWire?: Uint8Array;
  /**
   * The pages' bytes are held by this chunk alone (a pulled chunk's receive buffer): the device
   * may take that buffer (move it to its thread) instead of copying the pages.
   */
  readonly pagesOwned?: boolean;
  /**
   * With pagesOwned: told the receive buffers once the device has written the pages and holds
   * no view of them (Device.writePages), for the receiver to reuse (a pages socket's pool).
   */
  readonly pagesReturn?: (buffers: readonly ArrayBuffer[]) => void;
}

export function chunkBytes(chunk: SnapshotChunk): number {
  let n = 32;
  for (const p of chunk.pages) n += 16 + p.data.byteLength;
  if (chunk.meta) n += 64 * chunk.meta.contexts.length + 256 * chunk.meta.sessions.length;
  return n;
}
