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
  /**
   * The bytes are in the buffer already: `data` views the replica's memory, where a pulled
   * chunk's reader put them as they came off the socket (PagesPlacer); nothing is written.
   */
  readonly placed?: boolean;
}

/** A run of pages by where it goes, before its bytes have come (a pulled chunk's reader). */
export interface PagesRunHead {
  readonly context: number;
  readonly bo: number;
  readonly firstPage: number;
  readonly bytes: number;
}

/**
 * Where a run's bytes may be read to in place: `into` (exactly the run's bytes of the
 * replica's memory) while `live()` says the chunk is still the one the replica expects next.
 */
export interface PagesPlacement {
  readonly into: Uint8Array;
  live(): boolean;
}

/**
 * Asked by a pull's reader for each run of a chunk before its bytes come: a placement to read
 * them straight into, or undefined (they are read into a receive buffer and written as ever).
 */
export type PagesPlacer = (
  chunk: { readonly snapshotId: number; readonly index: number },
  run: PagesRunHead,
) => PagesPlacement | undefined;

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
