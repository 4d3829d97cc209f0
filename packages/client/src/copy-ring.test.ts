// Proves that a CopyRing's copies keep their bytes until released, oldest first, whatever the
// sizes and the order of copies and releases (seeded random runs against the originals); that
// copies come from the ring while it has room (wrapping round), and from buffers of their own
// when it has none or when a copy is larger than the ring.
import { describe, expect, it } from "vitest";
import { CopyRing } from "./copy-ring.js";

function seeded(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 31;
  };
}

const bytes = (n: number, fill: number) => new Uint8Array(n).fill(fill);
/** Byte equality (vitest's toEqual walks typed arrays slowly). */
const same = (a: Uint8Array, b: Uint8Array) =>
  Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);

describe("CopyRing", () => {
  it("copies into one ring while there is room, then wraps to the front", () => {
    const ring = new CopyRing(100);
    const a = ring.copy(bytes(40, 1));
    const b = ring.copy(bytes(40, 2));
    expect(a.buffer).toBe(b.buffer);
    expect(b.byteOffset).toBe(40);
    // 20 bytes left at the end: a 30-byte copy does not fit there, nor before `a`.
    const own = ring.copy(bytes(30, 3));
    expect(own.buffer).not.toBe(a.buffer);
    ring.releaseOldest(); // a
    // Now it fits at the front, where a was.
    ring.releaseOldest(); // b
    ring.releaseOldest(); // own
    expect(ring.live).toBe(0);
    const c = ring.copy(bytes(30, 4));
    expect(c.buffer).toBe(a.buffer);
    expect(c.byteOffset).toBe(0);
  });

  it("wraps round while older copies are still held", () => {
    const ring = new CopyRing(100);
    const a = ring.copy(bytes(40, 1));
    ring.copy(bytes(40, 2));
    ring.releaseOldest(); // a: 0..40 free again
    const c = ring.copy(bytes(30, 3)); // does not fit after b (80..100): goes to the front
    expect(c.buffer).toBe(a.buffer);
    expect(c.byteOffset).toBe(0);
    const d = ring.copy(bytes(10, 4)); // fits between c and b
    expect(d.buffer).toBe(a.buffer);
    expect(d.byteOffset).toBe(30);
    expect(ring.copy(bytes(1, 5)).buffer).not.toBe(a.buffer); // 40..40: no room
    expect([...c]).toEqual(new Array(30).fill(3));
  });

  it("gives a copy larger than the ring a buffer of its own, and copies nothing for no bytes", () => {
    const ring = new CopyRing(16);
    const big = bytes(17, 9);
    const c = ring.copy(big);
    expect(c).toEqual(big);
    expect(c.buffer).not.toBe(big.buffer);
    expect(ring.copy(new Uint8Array(0)).byteLength).toBe(0);
    expect(ring.live).toBe(2);
  });

  it("keeps every live copy's bytes in random runs", () => {
    for (let seed = 1; seed <= 20; seed++) {
      const random = seeded(seed);
      const ring = new CopyRing(1 + Math.floor(random() * 4096));
      const live: { copy: Uint8Array; original: Uint8Array }[] = [];
      for (let step = 0; step < 2000; step++) {
        if (live.length > 0 && random() < 0.45) {
          const oldest = live.shift()!;
          expect(same(oldest.copy, oldest.original)).toBe(true);
          ring.releaseOldest();
          continue;
        }
        const n = Math.floor(random() * 700);
        const source = new Uint8Array(n);
        for (let i = 0; i < n; i++) source[i] = Math.floor(random() * 256);
        const original = source.slice();
        const copy = ring.copy(source);
        source.fill(0); // the caller reuses its buffer at once
        live.push({ copy, original });
      }
      for (const { copy, original } of live) expect(same(copy, original)).toBe(true);
      expect(ring.live).toBe(live.length);
    }
  });
});
