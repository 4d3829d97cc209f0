// Proves that acknowledged chunks' buffers are reused: a chunk recycled after it was read lends
// its shared memory to a later chunk, every chunk still carries its own pages' bytes, and a
// whole snapshot then needs a handful of buffers rather than one per chunk.
import { describe, expect, it } from "vitest";
import { Backend } from "../paravirt/backend.js";
import { TestGuest, testBackendOptions } from "../testing/test-guest.js";
import { READ_AHEAD, SnapshotSource } from "./snapshot-source.js";

const PAGE = 4096;
const PAGES = 8 * READ_AHEAD; // a snapshot of 4 read-aheads' chunks

function filledBackend(): Backend {
  const backend = new Backend(testBackendOptions());
  const guest = new TestGuest(backend, "s1");
  const ctx = guest.createContext();
  const bo = guest.alloc(ctx, PAGES * PAGE);
  const bytes = new Uint8Array(PAGES * PAGE);
  for (let p = 0; p < PAGES; p++) bytes.fill(p + 1, p * PAGE, (p + 1) * PAGE);
  guest.write(ctx, bo, 0, bytes);
  return backend;
}

/** Reads the whole snapshot in 2-page chunks; `recycle` says whether each is handed back. */
function readAll(recycle: boolean): { memories: Set<ArrayBufferLike>; pagesSeen: number } {
  const source = new SnapshotSource(filledBackend(), 1, 0, 2 * PAGE);
  const memories = new Set<ArrayBufferLike>();
  let pagesSeen = 0;
  for (let chunk = source.next(); chunk; chunk = source.next()) {
    for (const run of chunk.pages) {
      for (let i = 0; i < run.data.byteLength / PAGE; i++) {
        const page = run.firstPage + i;
        const at = i * PAGE;
        expect(run.data[at], `page ${page}`).toBe(page + 1);
        expect(run.data[at + PAGE - 1], `page ${page}`).toBe(page + 1);
        pagesSeen++;
      }
    }
    if (chunk.pagesWire !== undefined) memories.add(chunk.pagesWire.buffer);
    if (recycle) source.recycle(chunk);
    if (chunk.last) break;
  }
  return { memories, pagesSeen };
}

describe("recycled snapshot chunk buffers", () => {
  it("lays later chunks into acknowledged chunks' memory, bytes intact", () => {
    const fresh = readAll(false);
    const reused = readAll(true);
    expect(fresh.pagesSeen).toBe(PAGES);
    expect(reused.pagesSeen).toBe(PAGES);
    expect(fresh.memories.size).toBe(PAGES / 2); // one buffer per chunk without recycling
    // with it: the read-ahead's buffers and a few more, whatever the snapshot's size
    expect(reused.memories.size).toBeLessThanOrEqual(READ_AHEAD + 2);
    for (const m of reused.memories) expect(m).toBeInstanceOf(SharedArrayBuffer);
  });
});
