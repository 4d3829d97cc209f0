// Proves the device layer on its own: seeded 32-bit handles that are reproducible per seed,
// different across seeds, non-zero and unique among live objects; page-granular VRAM accounting
// with a clean OUT_OF_MEMORY; zero-filled buffers; bounds checks that cannot overflow; and launch
// checks in their documented order (kernel, count, slot kinds, validate, work limit).
import { ErrorCode } from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Device, type DeviceArg, type DeviceOptions } from "./device.js";
import { HandleGenerator } from "./handle-generator.js";
import { PAGE_SIZE_BYTES, roundUpToPage } from "./vram.js";

const options = (o: Partial<DeviceOptions> = {}): DeviceOptions => ({
  seed: 1,
  vramBytes: 1 << 20,
  maxBoBytes: 256 << 10,
  maxKernelWork: 1 << 20,
  ...o,
});

/** A fixed history of contexts and buffers; every device handle it produced, in order. */
function handlesOf(device: Device): number[] {
  const handles: number[] = [];
  for (let c = 0; c < 3; c++) {
    const ctx = device.createContext();
    handles.push(ctx.handle);
    for (let b = 0; b < 4; b++) {
      const bo = device.allocBo(ctx, 4096);
      if ("code" in bo) throw new Error(bo.message);
      handles.push(bo.id);
    }
  }
  return handles;
}

describe("device handles", () => {
  it("are a function of the seed: equal for equal seeds, different for different seeds", () => {
    const one = handlesOf(new Device(options({ seed: 1 })));
    expect(handlesOf(new Device(options({ seed: 1 })))).toEqual(one);
    const two = handlesOf(new Device(options({ seed: 2 })));
    for (const [i, h] of two.entries()) expect(h).not.toBe(one[i]);
  });

  it("are 32-bit, non-zero and unique among live contexts and buffers", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), (seed) => {
        const handles = handlesOf(new Device(options({ seed })));
        for (const h of handles) {
          expect(Number.isInteger(h) && h > 0 && h <= 0xffffffff).toBe(true);
        }
        expect(new Set(handles).size).toBe(handles.length);
      }),
      { numRuns: 50 },
    );
  });

  it("the generator never returns a taken value or zero", () => {
    const reference = new HandleGenerator(7);
    const drawn = [
      reference.next(() => false),
      reference.next(() => false),
      reference.next(() => false),
    ];
    // Taking the first two draws forces the generator on to the third.
    const skipping = new HandleGenerator(7);
    expect(skipping.next((h) => h === drawn[0] || h === drawn[1])).toBe(drawn[2]);
    const g = new HandleGenerator(0);
    for (let i = 0; i < 10_000; i++) expect(g.next(() => false)).not.toBe(0);
  });
});

describe("VRAM", () => {
  it("is handed out in whole pages and returned on free and context destroy", () => {
    const device = new Device(options({ vramBytes: 16 * PAGE_SIZE_BYTES }));
    const ctx = device.createContext();
    const a = device.allocBo(ctx, 1);
    const b = device.allocBo(ctx, PAGE_SIZE_BYTES + 1);
    if ("code" in a || "code" in b) throw new Error("alloc failed");
    expect([a.byteLength, b.byteLength]).toEqual([PAGE_SIZE_BYTES, 2 * PAGE_SIZE_BYTES]);
    expect(device.vram.usedBytes).toBe(3 * PAGE_SIZE_BYTES);
    expect(device.boCount).toBe(2);
    device.freeBo(ctx, a.id);
    device.freeBo(ctx, a.id); // a second free is a no-op
    expect(device.vram.usedBytes).toBe(2 * PAGE_SIZE_BYTES);
    device.destroyContext(ctx);
    expect([device.vram.usedBytes, device.boCount, device.contextCount]).toEqual([0, 0, 0]);
  });

  it("refuses an allocation that does not fit with OUT_OF_MEMORY and changes nothing", () => {
    const device = new Device(options({ vramBytes: 4 * PAGE_SIZE_BYTES }));
    const ctx = device.createContext();
    expect("code" in device.allocBo(ctx, 3 * PAGE_SIZE_BYTES)).toBe(false);
    const refused = device.allocBo(ctx, PAGE_SIZE_BYTES + 1);
    expect("code" in refused && refused.code).toBe(ErrorCode.OUT_OF_MEMORY);
    expect([device.vram.usedBytes, device.boCount, ctx.bos.size]).toEqual([
      3 * PAGE_SIZE_BYTES,
      1,
      1,
    ]);
    expect("code" in device.allocBo(ctx, PAGE_SIZE_BYTES)).toBe(false);
  });

  it("checks sizes: 1..maxBoBytes safe integers, page-rounded", () => {
    const device = new Device(options());
    for (const bad of [0, -1, 0.5, Number.NaN, Infinity, (256 << 10) + 1, 2 ** 53]) {
      const r = device.checkAllocSize(bad);
      expect(typeof r === "object" && r.code).toBe(ErrorCode.INVALID_SIZE);
    }
    for (const good of [1, 4096, 4097, 256 << 10]) {
      expect(device.checkAllocSize(good)).toBe(roundUpToPage(good));
    }
  });

  it("gives zero-filled buffers", () => {
    const device = new Device(options());
    const ctx = device.createContext();
    const bo = device.allocBo(ctx, 64 << 10);
    if ("code" in bo) throw new Error(bo.message);
    expect(bo.bytes.every((x) => x === 0)).toBe(true);
  });
});

describe("transfers", () => {
  const device = new Device(options());
  const ctx = device.createContext();
  const alloc = (size: number) => {
    const bo = device.allocBo(ctx, size);
    if ("code" in bo) throw new Error(bo.message);
    return bo;
  };
  const a = alloc(4096);
  const b = alloc(8192);

  it("accept exactly the in-bounds ranges, with no overflow at 2^53", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.integer({ min: -10, max: 8300 }),
          fc.constantFrom(2 ** 53, 2 ** 53 - 1, -0, 0.5, Number.NaN),
        ),
        fc.oneof(
          fc.integer({ min: -10, max: 8300 }),
          fc.constantFrom(2 ** 53, Number.MAX_SAFE_INTEGER, 1.5),
        ),
        (offset, length) => {
          const inside =
            Number.isSafeInteger(offset) &&
            Number.isSafeInteger(length) &&
            offset >= 0 &&
            length >= 0 &&
            offset + length <= 4096;
          const read = device.dmaRead(a, offset, length);
          expect(read instanceof Uint8Array).toBe(inside);
          if (!(read instanceof Uint8Array)) expect(read.code).toBe(ErrorCode.OUT_OF_BOUNDS);
          const copied = device.copy(b, 0, a, offset, length);
          expect(copied === null).toBe(inside && length <= 8192);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("a refused write or copy leaves every byte as it was", () => {
    a.bytes.fill(3);
    b.bytes.fill(4);
    expect(device.dmaWrite(a, 4090, new Uint8Array(7).fill(9))?.code).toBe(ErrorCode.OUT_OF_BOUNDS);
    expect(device.copy(b, 0, a, 0, 4097)?.code).toBe(ErrorCode.OUT_OF_BOUNDS);
    expect(device.copy(b, 8190, a, 0, 4)?.code).toBe(ErrorCode.OUT_OF_BOUNDS);
    expect(a.bytes.every((x) => x === 3) && b.bytes.every((x) => x === 4)).toBe(true);
  });
});

describe("launch checks, in order", () => {
  const device = new Device(options({ maxKernelWork: 1000 }));
  const ctx = device.createContext();
  const bo = device.allocBo(ctx, 4096);
  if ("code" in bo) throw new Error(bo.message);
  const buf: DeviceArg = { kind: "buffer", bo };
  const u32 = (value: number): DeviceArg => ({ kind: "u32", value });
  const code = (kernel: string, args: DeviceArg[]) =>
    device.launch(kernel, args)?.code ?? ErrorCode.OK;

  it("unknown kernel before anything else", () => {
    expect(code("nope", [])).toBe(ErrorCode.UNKNOWN_KERNEL);
    expect(code("toString", [buf, u32(1), u32(1)])).toBe(ErrorCode.UNKNOWN_KERNEL);
  });

  it("argument count and slot kinds, then the kernel's own validation, then work", () => {
    expect(code("fill", [buf, u32(1)])).toBe(ErrorCode.BAD_KERNEL_ARGS);
    expect(code("fill", [u32(1), u32(1), u32(1)])).toBe(ErrorCode.BAD_KERNEL_ARGS);
    // Too big for the buffer and above the work limit: the argument error wins.
    expect(code("fill", [buf, u32(5000), u32(1)])).toBe(ErrorCode.BAD_KERNEL_ARGS);
    expect(code("fill", [buf, u32(1001), u32(1)])).toBe(ErrorCode.LIMIT_EXCEEDED);
    expect(bo.u32[0]).toBe(0);
    expect(code("fill", [buf, u32(1000), u32(5)])).toBe(ErrorCode.OK);
    expect(bo.u32[999]).toBe(5);
    expect(bo.u32[1000]).toBe(0);
  });
});
