// Proves the pages socket's receive pool: a buffer given back (after the device wrote it) is
// handed out again for the next chunk of its size class, so a steady pull allocates none per
// chunk; a buffer still out is never handed out twice, nor one given twice; small frames,
// foreign sizes, detached buffers and what comes back past freeBytesMax or after close are
// not kept.
import { describe, expect, it } from "vitest";
import { ReceivePool } from "./receive-pool.js";

const KiB = 1024;
const pool = (freeBytesMax = 8 * 1024 * KiB) =>
  new ReceivePool({ roundBytes: 64 * KiB, pooledFromBytes: 64 * KiB, freeBytesMax });

describe("ReceivePool", () => {
  it("reuses a given-back buffer: a steady pull of 1000 chunks allocates the in-flight few", () => {
    const p = pool();
    const inFlight: Uint8Array[] = [];
    for (let i = 0; i < 1000; i++) {
      const view = p.take(1024 * KiB + 200 + (i % 7)); // a chunk frame: 1 MiB of pages and heads
      expect(view.byteLength).toBe(1024 * KiB + 200 + (i % 7));
      expect(view.byteOffset).toBe(0);
      inFlight.push(view);
      if (inFlight.length > 3) p.give([inFlight.shift()!.buffer as ArrayBuffer]);
    }
    expect(p.allocated).toBe(4);
  });

  it("never hands out a buffer that is out, nor one given back twice", () => {
    const p = pool();
    const a = p.take(100 * KiB);
    const b = p.take(100 * KiB);
    expect(b.buffer).not.toBe(a.buffer);
    p.give([a.buffer as ArrayBuffer]);
    p.give([a.buffer as ArrayBuffer]); // a second give of the same buffer keeps one entry
    expect(p.freeCount).toBe(1);
    const c = p.take(100 * KiB);
    const d = p.take(100 * KiB);
    expect(c.buffer).toBe(a.buffer);
    expect(d.buffer).not.toBe(a.buffer);
    expect(d.buffer).not.toBe(b.buffer);
    expect(p.allocated).toBe(3);
  });

  it("keeps size classes apart and small frames out", () => {
    const p = pool();
    const big = p.take(200 * KiB); // 256 KiB class
    p.give([big.buffer as ArrayBuffer]);
    expect(p.take(100 * KiB).buffer).not.toBe(big.buffer); // 128 KiB class
    const small = p.take(1000);
    expect(small.buffer.byteLength).toBe(1000);
    p.give([small.buffer as ArrayBuffer]);
    expect(p.freeCount).toBe(1);
  });

  it("drops detached buffers, foreign sizes, what passes freeBytesMax and all after close", () => {
    const p = pool(256 * KiB);
    const moved = p.take(100 * KiB).buffer as ArrayBuffer;
    structuredClone(moved, { transfer: [moved] }); // detaches it here
    p.give([moved, new ArrayBuffer(100 * KiB)]);
    expect(p.freeCount).toBe(0);
    const views = [p.take(100 * KiB), p.take(100 * KiB), p.take(100 * KiB)];
    p.give(views.map((v) => v.buffer as ArrayBuffer));
    expect(p.freeCount).toBe(2); // 2 x 128 KiB fit in 256 KiB
    p.close();
    expect(p.freeCount).toBe(0);
    p.give([p.take(100 * KiB).buffer as ArrayBuffer]);
    expect(p.freeCount).toBe(0);
  });
});
