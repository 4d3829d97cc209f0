// Records which bytes of which pages MMIO stores have written since the last take, with the
// bytes the stores wrote (later stores win), so the writes can leave as one batch per page
// carrying only the written bytes (DESIGN §6). The bytes come from the store frames themselves,
// never from VRAM: shipping never waits for the device (issue #14).
import { PAGE_SHIFT, PAGE_SIZE_BYTES } from "../device/vram.js";

/** A run of written bytes within a page, with what the last stores wrote there. */
export interface Extent {
  readonly offsetInPage: number;
  readonly bytes: Uint8Array;
}

export interface DirtyPage {
  readonly context: number;
  readonly bo: number;
  readonly pageIndex: number;
  readonly extents: readonly Extent[];
}

/** What the tracker needs of a buffer: its guest address. */
export interface TrackedBuffer {
  readonly context: number;
  readonly handle: number;
}

/** A dirty page: which bytes were written (1 = written) and what was written there. */
interface DirtyBytes {
  readonly mask: Uint8Array;
  readonly bytes: Uint8Array;
}

/** Per buffer: page index → its dirty bytes. */
type PageMasks = Map<number, DirtyBytes>;

export class MmioTracker {
  private readonly dirty = new Map<TrackedBuffer, PageMasks>();
  private storesSinceTake = 0;

  /** Stores recorded since the last take. */
  get pendingStores(): number {
    return this.storesSinceTake;
  }

  get dirtyPageCount(): number {
    let pages = 0;
    for (const masks of this.dirty.values()) pages += masks.size;
    return pages;
  }

  /** The dirty pages of one buffer, for a run of marks (avoids a lookup per store). */
  pagesFor(buffer: TrackedBuffer): PageMasks {
    let masks = this.dirty.get(buffer);
    if (masks === undefined) {
      masks = new Map();
      this.dirty.set(buffer, masks);
    }
    return masks;
  }

  /**
   * Records a store of `width` bytes at `offset`, its bytes at data[from, from+width); the range
   * never crosses a page (stores are aligned).
   */
  mark(pages: PageMasks, offset: number, width: number, data: Uint8Array, from: number): void {
    const page = offset >>> PAGE_SHIFT;
    let dirty = pages.get(page);
    if (dirty === undefined) {
      dirty = { mask: new Uint8Array(PAGE_SIZE_BYTES), bytes: new Uint8Array(PAGE_SIZE_BYTES) };
      pages.set(page, dirty);
    }
    const at = offset & (PAGE_SIZE_BYTES - 1);
    for (let k = 0; k < width; k++) {
      dirty.mask[at + k] = 1;
      dirty.bytes[at + k] = data[from + k]!;
    }
    this.storesSinceTake++;
  }

  /** Forgets a buffer (freed or its context destroyed): nothing of it can be shipped later. */
  forget(buffer: TrackedBuffer): void {
    this.dirty.delete(buffer);
  }

  /**
   * Every dirty page with its written extents, holding the bytes the last stores wrote there
   * (what VRAM holds once the device ran them), in a stable order (buffer first-dirtied order,
   * then page index); then starts afresh.
   */
  take(): DirtyPage[] {
    const pages: DirtyPage[] = [];
    for (const [buffer, masks] of this.dirty) {
      const indexes = [...masks.keys()].sort((a, b) => a - b);
      for (const pageIndex of indexes) {
        const extents = extentsOf(masks.get(pageIndex)!);
        pages.push({ context: buffer.context, bo: buffer.handle, pageIndex, extents });
      }
    }
    this.dirty.clear();
    this.storesSinceTake = 0;
    return pages;
  }
}

function extentsOf({ mask, bytes }: DirtyBytes): Extent[] {
  const extents: Extent[] = [];
  let i = 0;
  while (i < PAGE_SIZE_BYTES) {
    if (mask[i] === 0) {
      i++;
      continue;
    }
    const start = i;
    while (i < PAGE_SIZE_BYTES && mask[i] === 1) i++;
    extents.push({ offsetInPage: start, bytes: bytes.slice(start, i) });
  }
  return extents;
}
