// Proves the per-page MMIO batching (DESIGN §4, §6): through the backend, a page written many
// times is reported once with only its written extents holding the bytes the last stores wrote
// (the frames' own bytes, never VRAM read back: issue #14), equal to VRAM once the device ran
// them, adjacent stores merge, pages and buffers come out in a stable order under guest handles,
// take() starts afresh, freed buffers are forgotten, trackMmio:false records nothing; and, on
// random stores, the extents are exactly the written bytes.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { PAGE_SIZE_BYTES } from "../device/vram.js";
import { TestGuest, testBackendOptions } from "../testing/test-guest.js";
import { Backend } from "./backend.js";
import { MmioTracker, type TrackedBuffer } from "./mmio-tracker.js";

function setup(trackMmio = true) {
  const backend = new Backend(testBackendOptions({ trackMmio }));
  const g = new TestGuest(backend, "g");
  g.createContext(); // context 1 unused, so guest handles differ from indexes
  const ctx = g.createContext();
  g.alloc(ctx, 4096);
  const bo = g.alloc(ctx, 4 * PAGE_SIZE_BYTES);
  g.map(ctx, bo);
  return { backend, g, ctx, bo };
}

const extent = (offsetInPage: number, bytes: number[]) => ({
  offsetInPage,
  bytes: Uint8Array.from(bytes),
});

describe("MMIO tracking through the backend", () => {
  it("reports a page written many times once, with only its written extents, as the stores left them", () => {
    const { backend, g, ctx, bo } = setup();
    g.store(ctx, bo, [{ offset: 8, bytes: [1, 2, 3, 4] }]);
    g.store(ctx, bo, [
      { offset: 8, bytes: [5, 6, 7, 8] },
      { offset: 100, bytes: [9] },
    ]);
    g.store(ctx, bo, [{ offset: 10, bytes: [0xaa, 0xbb] }]);
    expect(backend.mmio.pendingStores).toBe(4);
    expect(backend.mmio.dirtyPageCount).toBe(1);
    const pages = backend.takeDirtyPages();
    expect(pages).toEqual([
      {
        context: ctx,
        bo,
        pageIndex: 0,
        extents: [extent(8, [5, 6, 0xaa, 0xbb]), extent(100, [9])],
      },
    ]);
    // What VRAM holds once the device ran the stores.
    const vram = backend.contexts.get(ctx)!.bos.get(bo)!.bo.bytes;
    for (const e of pages[0]!.extents) {
      expect(vram.subarray(e.offsetInPage, e.offsetInPage + e.bytes.length)).toEqual(e.bytes);
    }
  });

  it("ships the stores' bytes, not what a later write left in VRAM (the sequencer flushes first)", () => {
    const { backend, g, ctx, bo } = setup();
    g.store(ctx, bo, [{ offset: 100, bytes: [9] }]);
    g.write(ctx, bo, 100, Uint8Array.of(0x77, 0x66));
    expect(backend.takeDirtyPages()[0]!.extents).toEqual([extent(100, [9])]);
  });

  it("merges adjacent stores into one extent and keeps a gap as two", () => {
    const { backend, g, ctx, bo } = setup();
    g.store(ctx, bo, [
      { offset: 4, bytes: [2, 2] },
      { offset: 0, bytes: [1, 1, 1, 1] },
      { offset: 6, bytes: [3, 3] },
      { offset: 8, bytes: [4, 4, 4, 4, 4, 4, 4, 4] },
      { offset: 17, bytes: [5] },
    ]);
    const [page] = backend.takeDirtyPages();
    expect(page!.extents).toEqual([
      extent(0, [1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4]),
      extent(17, [5]),
    ]);
  });

  it("gives one entry per page in page order, buffers in first-dirtied order", () => {
    const { backend, g, ctx, bo } = setup();
    const other = g.alloc(ctx, 2 * PAGE_SIZE_BYTES);
    g.map(ctx, other);
    g.store(ctx, other, [{ offset: PAGE_SIZE_BYTES, bytes: [7] }]);
    g.store(ctx, bo, [
      { offset: 3 * PAGE_SIZE_BYTES + 8, bytes: [3, 3, 3, 3, 3, 3, 3, 3] },
      { offset: PAGE_SIZE_BYTES - 4, bytes: [1, 1, 1, 1] }, // ends exactly at the page edge
      { offset: PAGE_SIZE_BYTES, bytes: [2, 2, 2, 2] }, // adjacent, but on the next page
    ]);
    expect(backend.takeDirtyPages()).toEqual([
      { context: ctx, bo: other, pageIndex: 1, extents: [extent(0, [7])] },
      { context: ctx, bo, pageIndex: 0, extents: [extent(PAGE_SIZE_BYTES - 4, [1, 1, 1, 1])] },
      { context: ctx, bo, pageIndex: 1, extents: [extent(0, [2, 2, 2, 2])] },
      { context: ctx, bo, pageIndex: 3, extents: [extent(8, [3, 3, 3, 3, 3, 3, 3, 3])] },
    ]);
  });

  it("take() clears: a second take is empty until the next store", () => {
    const { backend, g, ctx, bo } = setup();
    g.store(ctx, bo, [{ offset: 0, bytes: [1] }]);
    const first = backend.takeDirtyPages();
    expect(first).toHaveLength(1);
    expect(backend.takeDirtyPages()).toEqual([]);
    expect(backend.mmio.pendingStores).toBe(0);
    expect(backend.mmio.dirtyPageCount).toBe(0);
    // The shipped bytes are a copy: later stores do not rewrite them.
    g.store(ctx, bo, [{ offset: 0, bytes: [9] }]);
    expect(first[0]!.extents).toEqual([extent(0, [1])]);
    expect(backend.takeDirtyPages()).toEqual([
      { context: ctx, bo, pageIndex: 0, extents: [extent(0, [9])] },
    ]);
  });

  it("forgets a buffer's dirty pages when it is freed, its context destroyed or its session closed", () => {
    const { backend, g, ctx, bo } = setup();
    const keep = g.alloc(ctx, 4096);
    g.map(ctx, keep);
    g.store(ctx, bo, [{ offset: 0, bytes: [1] }]);
    g.store(ctx, keep, [{ offset: 0, bytes: [2] }]);
    g.ok({ op: "boFree", context: ctx, bo });
    expect(backend.takeDirtyPages()).toEqual([
      { context: ctx, bo: keep, pageIndex: 0, extents: [extent(0, [2])] },
    ]);

    g.store(ctx, keep, [{ offset: 0, bytes: [3] }]);
    g.ok({ op: "contextDestroy", context: ctx });
    expect(backend.takeDirtyPages()).toEqual([]);

    const c = g.createContext();
    const b = g.alloc(c, 4096);
    g.map(c, b);
    g.store(c, b, [{ offset: 0, bytes: [4] }]);
    backend.closeSession(g.session.id);
    expect(backend.takeDirtyPages()).toEqual([]);
    expect(backend.mmio.dirtyPageCount).toBe(0);
  });

  it("records nothing from refused batches", () => {
    const { backend, g, ctx, bo } = setup();
    g.stores({
      context: ctx,
      bo,
      offsets: [0, 3],
      widths: Uint8Array.of(1, 2),
      data: new Uint8Array(3),
    });
    expect(backend.takeDirtyPages()).toEqual([]);
    expect(backend.mmio.pendingStores).toBe(0);
  });

  it("with trackMmio:false applies stores to VRAM but records nothing", () => {
    const { backend, g, ctx, bo } = setup(false);
    g.store(ctx, bo, [
      { offset: 8, bytes: [1, 2, 3, 4] },
      { offset: PAGE_SIZE_BYTES, bytes: [5] },
    ]);
    expect(g.read(ctx, bo, 8, 4)).toEqual(Uint8Array.of(1, 2, 3, 4));
    expect(backend.mmio.pendingStores).toBe(0);
    expect(backend.mmio.dirtyPageCount).toBe(0);
    expect(backend.takeDirtyPages()).toEqual([]);
  });
});

describe("MmioTracker on random stores", () => {
  const PAGES = 3;
  const storeArb = fc
    .record({ slot: fc.nat(PAGES * PAGE_SIZE_BYTES - 1), width: fc.constantFrom(1, 2, 4, 8) })
    .map(({ slot, width }) => ({ offset: slot - (slot % width), width }));

  it("reports exactly the written bytes of each page, with what the last stores wrote", () => {
    fc.assert(
      fc.property(
        fc.array(storeArb, { minLength: 1, maxLength: 300 }),
        fc.nat(255),
        (stores, seed) => {
          const buffer: TrackedBuffer = { context: 4, handle: 9 };
          // What VRAM holds once the stores ran, in order (later stores win).
          const vram = new Uint8Array(PAGES * PAGE_SIZE_BYTES);
          const tracker = new MmioTracker();
          const masks = tracker.pagesFor(buffer);
          const written = new Set<number>();
          for (const [n, { offset, width }] of stores.entries()) {
            const data = Uint8Array.from({ length: width }, (_, k) => (n * 31 + k + seed) & 0xff);
            tracker.mark(masks, offset, width, data, 0);
            vram.set(data, offset);
            for (let k = 0; k < width; k++) written.add(offset + k);
          }
          expect(tracker.pendingStores).toBe(stores.length);
          const pages = tracker.take();
          const reported = new Set<number>();
          let previousPage = -1;
          for (const page of pages) {
            expect([page.context, page.bo]).toEqual([4, 9]);
            expect(page.pageIndex).toBeGreaterThan(previousPage);
            previousPage = page.pageIndex;
            let previousEnd = -1;
            for (const { offsetInPage, bytes } of page.extents) {
              // Maximal runs: never empty, never touching the previous one.
              expect(bytes.length).toBeGreaterThan(0);
              expect(offsetInPage).toBeGreaterThan(previousEnd);
              previousEnd = offsetInPage + bytes.length;
              expect(previousEnd).toBeLessThanOrEqual(PAGE_SIZE_BYTES);
              const start = page.pageIndex * PAGE_SIZE_BYTES + offsetInPage;
              expect(bytes).toEqual(vram.subarray(start, start + bytes.length));
              for (let k = 0; k < bytes.length; k++) reported.add(start + k);
            }
          }
          expect([...reported].sort((x, y) => x - y)).toEqual([...written].sort((x, y) => x - y));
          expect(tracker.take()).toEqual([]);
        },
      ),
      { numRuns: 100 },
    );
  });
});
