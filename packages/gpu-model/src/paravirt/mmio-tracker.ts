// Records which bytes of which pages MMIO stores have written since the last take, so the
// writes can leave as one batch per page carrying only the written bytes (DESIGN §6).
import { PAGE_SHIFT, PAGE_SIZE_BYTES } from "../device/vram.js";

/** A run of written bytes within a page, with their current contents. */
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

/** What the tracker needs of a buffer: its guest address and its VRAM. */
export interface TrackedBuffer {
  readonly context: number;
  readonly handle: number;
  readonly bytes: Uint8Array;
}

/** Per buffer: page index → a byte mask of the page (1 = written). */
type PageMasks = Map<number, Uint8Array>;

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

  /** The masks of one buffer, for a run of marks (avoids a lookup per store). */
  masksFor(buffer: TrackedBuffer): PageMasks {
    let masks = this.dirty.get(buffer);
    if (masks === undefined) {
      masks = new Map();
      this.dirty.set(buffer, masks);
    }
    return masks;
  }

  /** Marks [offset, offset+width) written; the range never crosses a page (stores are aligned). */
  mark(masks: PageMasks, offset: number, width: number): void {
    const page = offset >>> PAGE_SHIFT;
    let mask = masks.get(page);
    if (mask === undefined) {
      mask = new Uint8Array(PAGE_SIZE_BYTES);
      masks.set(page, mask);
    }
    const at = offset & (PAGE_SIZE_BYTES - 1);
    for (let k = 0; k < width; k++) mask[at + k] = 1;
    this.storesSinceTake++;
  }

  /** Forgets a buffer (freed or its context destroyed): nothing of it can be shipped later. */
  forget(buffer: TrackedBuffer): void {
    this.dirty.delete(buffer);
  }

  /**
   * Every dirty page with its written extents, holding the bytes VRAM has now, in a stable
   * order (buffer first-dirtied order, then page index); then starts afresh.
   */
  take(): DirtyPage[] {
    const pages: DirtyPage[] = [];
    for (const [buffer, masks] of this.dirty) {
      const indexes = [...masks.keys()].sort((a, b) => a - b);
      for (const pageIndex of indexes) {
        const extents = extentsOf(masks.get(pageIndex)!, buffer.bytes, pageIndex * PAGE_SIZE_BYTES);
        pages.push({ context: buffer.context, bo: buffer.handle, pageIndex, extents });
      }
    }
    this.dirty.clear();
    this.storesSinceTake = 0;
    return pages;
  }
}

function extentsOf(mask: Uint8Array, vram: Uint8Array, pageStart: number): Extent[] {
  const extents: Extent[] = [];
  let i = 0;
  while (i < PAGE_SIZE_BYTES) {
    if (mask[i] === 0) {
      i++;
      continue;
    }
    const start = i;
    while (i < PAGE_SIZE_BYTES && mask[i] === 1) i++;
    extents.push({ offsetInPage: start, bytes: vram.slice(pageStart + start, pageStart + i) });
  }
  return extents;
}
