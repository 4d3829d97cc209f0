// Proves the executor's buffer pools on a stand-in device (no GPU): readbacks are pooled by
// power-of-two size class from 256 B to 1 MiB and larger ones are made and destroyed per use; a
// given-back readback is unmapped and handed out again for its class, up to 8 kept per class;
// upload blocks of up to 64 KiB are reused, a larger upload gets a buffer of its own that is
// destroyed after use, and a flush writes the used bytes rounded up to whole words.
import { describe, expect, it } from "vitest";
import { ReadbackPool, readbackClass, UPLOAD_BLOCK_BYTES, UploadPool } from "./pools.js";

interface FakeBuffer {
  readonly size: number;
  mapState: "unmapped" | "pending" | "mapped";
  destroyed: boolean;
  unmap(): void;
  destroy(): void;
  mapAsync(): Promise<undefined>;
}

function fakeDevice() {
  const made: FakeBuffer[] = [];
  const writes: { buffer: FakeBuffer; size: number }[] = [];
  const device = {
    createBuffer({ size }: { size: number }): FakeBuffer {
      const b: FakeBuffer = {
        size,
        mapState: "unmapped",
        destroyed: false,
        unmap() {
          b.mapState = "unmapped";
        },
        destroy() {
          b.destroyed = true;
        },
        mapAsync() {
          b.mapState = "mapped";
          return Promise.resolve(undefined);
        },
      };
      made.push(b);
      return b;
    },
    queue: {
      writeBuffer(buffer: FakeBuffer, _at: number, _data: Uint8Array, _from: number, size: number) {
        writes.push({ buffer, size });
      },
    },
  };
  return { device: device as unknown as GPUDevice, made, writes };
}

describe("readbackClass", () => {
  it("rounds up to a power of two from 256 B, and pools nothing above 1 MiB", () => {
    expect(readbackClass(4)).toBe(256);
    expect(readbackClass(256)).toBe(256);
    expect(readbackClass(257)).toBe(512);
    expect(readbackClass(1 << 20)).toBe(1 << 20);
    expect(readbackClass((1 << 20) + 4)).toBe(0);
  });
});

describe("ReadbackPool", () => {
  it("hands a given-back buffer out again for its class, unmapped", async () => {
    const { device, made } = fakeDevice();
    const pool = new ReadbackPool(device);
    const first = pool.take(100);
    await pool.map(first);
    pool.give(first);
    expect((first.buffer as unknown as FakeBuffer).mapState).toBe("unmapped");
    expect(pool.take(200).buffer).toBe(first.buffer);
    expect(pool.take(300).buffer).not.toBe(first.buffer);
    expect(made.map((b) => b.size)).toEqual([256, 512]);
  });

  it("destroys readbacks above 1 MiB after use, and keeps at most 8 per class", () => {
    const { device, made } = fakeDevice();
    const pool = new ReadbackPool(device);
    const big = pool.take((1 << 20) + 4);
    pool.give(big);
    expect(made[0]).toMatchObject({ size: (1 << 20) + 4, destroyed: true });
    const taken = Array.from({ length: 10 }, () => pool.take(64));
    for (const rb of taken) pool.give(rb);
    expect(made.filter((b) => b.destroyed)).toHaveLength(1 + 2);
    pool.destroy();
    expect(made.every((b) => b.destroyed)).toBe(true);
  });
});

describe("UploadPool", () => {
  it("reuses blocks, gives a large upload its own buffer, and flushes whole words", () => {
    const { device, made, writes } = fakeDevice();
    const pool = new UploadPool(device);
    const block = pool.take(48);
    block.used = 50;
    pool.flush(block);
    expect(writes).toEqual([{ buffer: block.buffer, size: 52 }]);
    pool.give(block);
    expect(pool.take(UPLOAD_BLOCK_BYTES)).toBe(block);
    const large = pool.take(UPLOAD_BLOCK_BYTES + 1);
    expect(large.bytes.byteLength).toBe(UPLOAD_BLOCK_BYTES + 4);
    pool.give(large);
    expect((large.buffer as unknown as FakeBuffer).destroyed).toBe(true);
    expect(made).toHaveLength(2);
  });
});
