// Proves bad mapping and MMIO store batches (unmapped, mapped twice, misaligned, outside the
// buffer, malformed, too many) are refused with their exact ErrorCode, all or nothing: no store
// of a refused batch is applied or recorded as dirty (testing/refusal-harness.ts).
import { ErrorCode } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { BIG, call, expectRefused, setup, stores } from "../testing/refusal-harness.js";
import { storeBatch } from "../testing/test-guest.js";

describe("mapping and MMIO stores", () => {
  it("store to an unmapped buffer: NOT_MAPPED (also after unmap)", () => {
    const { g, ctx, a, b } = setup();
    expectRefused(g, stores(storeBatch(ctx, b, [{ offset: 0, bytes: [1] }])), ErrorCode.NOT_MAPPED);
    g.ok({ op: "boUnmap", context: ctx, bo: a });
    expectRefused(g, stores(storeBatch(ctx, a, [{ offset: 0, bytes: [1] }])), ErrorCode.NOT_MAPPED);
  });

  it("map twice: ALREADY_MAPPED", () => {
    const { g, ctx, a } = setup();
    expectRefused(g, call({ op: "boMap", context: ctx, bo: a }), ErrorCode.ALREADY_MAPPED);
  });

  it("unmap an unmapped buffer: NOT_MAPPED", () => {
    const { g, ctx, a, b } = setup();
    expectRefused(g, call({ op: "boUnmap", context: ctx, bo: b }), ErrorCode.NOT_MAPPED);
    g.ok({ op: "boUnmap", context: ctx, bo: a });
    expectRefused(g, call({ op: "boUnmap", context: ctx, bo: a }), ErrorCode.NOT_MAPPED);
  });

  it.each([
    [2, 4],
    [4, 8],
    [1, 2],
    [4094, 4],
    [0.5, 1],
    [Number.NaN, 1],
  ])("misaligned store at %d of width %d: BAD_STORE", (offset, width) => {
    const { g, ctx, a } = setup();
    expectRefused(
      g,
      stores(storeBatch(ctx, a, [{ offset, bytes: new Array(width).fill(0xcc) }])),
      ErrorCode.BAD_STORE,
    );
  });

  it.each([3, 0, 5, 16, 255])("store of width %d: BAD_STORE", (width) => {
    const { g, ctx, a } = setup();
    expectRefused(
      g,
      stores(storeBatch(ctx, a, [{ offset: 0, bytes: new Array(width).fill(0xcc) }])),
      ErrorCode.BAD_STORE,
    );
  });

  it.each([
    [BIG, 1],
    [BIG, 8],
    [BIG + 4096, 4],
    [-8, 8],
    [2 ** 53, 1],
  ])("store past the end at %d of width %d: OUT_OF_BOUNDS", (offset, width) => {
    const { g, ctx, a } = setup();
    expectRefused(
      g,
      stores(storeBatch(ctx, a, [{ offset, bytes: new Array(width).fill(0xcc) }])),
      ErrorCode.OUT_OF_BOUNDS,
    );
  });

  it("widths/offsets count mismatch and data length mismatch: MALFORMED", () => {
    const { g, ctx, a } = setup();
    const good = storeBatch(ctx, a, [
      { offset: 0, bytes: [1, 2, 3, 4] },
      { offset: 8, bytes: [5] },
    ]);
    expectRefused(g, stores({ ...good, offsets: [0, 8, 16] }), ErrorCode.MALFORMED);
    expectRefused(g, stores({ ...good, widths: Uint8Array.of(4) }), ErrorCode.MALFORMED);
    expectRefused(g, stores({ ...good, data: good.data.subarray(0, 4) }), ErrorCode.MALFORMED);
    expectRefused(
      g,
      stores({ ...good, data: Uint8Array.of(...good.data, 0) }),
      ErrorCode.MALFORMED,
    );
    expectRefused(
      g,
      stores({ ...good, offsets: [], widths: new Uint8Array(0) }),
      ErrorCode.MALFORMED,
    );
  });

  it("one bad store among good ones: nothing of the batch is applied or recorded", () => {
    const { backend, g, ctx, a } = setup();
    const vram = backend.contexts.get(ctx)!.bos.get(a)!.bo.bytes;
    const before = vram.slice();
    const good = (offset: number) => ({ offset, bytes: [0xde, 0xad, 0xbe, 0xef] });
    for (const [bad, code] of [
      [{ offset: 2, bytes: [1, 2, 3, 4] }, ErrorCode.BAD_STORE],
      [{ offset: BIG, bytes: [1] }, ErrorCode.OUT_OF_BOUNDS],
      [{ offset: 0, bytes: [1, 2, 3] }, ErrorCode.BAD_STORE],
    ] as const) {
      expectRefused(g, stores(storeBatch(ctx, a, [good(0), good(4096), bad, good(64)])), code);
    }
    expect(vram).toEqual(before);
  });

  it("too many stores in one batch: LIMIT_EXCEEDED", () => {
    const { g, ctx, a } = setup({ maxStoresPerBatch: 8 });
    const many = (n: number) =>
      Array.from({ length: n }, (_, i) => ({ offset: i * 4, bytes: [i, 0, 0, 0] }));
    expectRefused(g, stores(storeBatch(ctx, a, many(9))), ErrorCode.LIMIT_EXCEEDED);
    g.store(ctx, a, many(8));
  });
});
