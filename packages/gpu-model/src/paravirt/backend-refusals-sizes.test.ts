// Proves offsets, lengths and sizes outside a buffer, VRAM exhaustion, tenant quotas and the
// DMA limit are refused with their exact ErrorCode and change no GPU state: each case sends one
// bad frame on a backend holding data (expectRefused in testing/refusal-harness.ts).
import { ErrorCode } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { BIG, call, expectRefused, SMALL, setup } from "../testing/refusal-harness.js";
import { OTHER_TENANT, TEST_TENANT } from "../testing/test-guest.js";

describe("offsets, lengths and sizes", () => {
  // [offset, length] against buffer A (8192 bytes): past the end, negative, fractional, huge,
  // overflowing 2^53, not a number.
  const outside: [number, number][] = [
    [BIG - 3, 4],
    [BIG, 1],
    [BIG + 1, 0],
    [BIG + 4096, 0],
    [-1, 1],
    [-4096, 4096],
    [0.5, 1],
    [Number.MAX_SAFE_INTEGER, 2],
    [2 ** 53 - 8, 16],
    [2 ** 53, 1],
    [2 ** 64, 1],
    [Number.NaN, 1],
    [Infinity, 1],
    [-Infinity, 1],
  ];

  it.each(outside)("dmaWrite at %d of %d bytes: OUT_OF_BOUNDS", (offset, length) => {
    const { g, ctx, a } = setup();
    expectRefused(
      g,
      call({
        op: "dmaWrite",
        context: ctx,
        bo: a,
        offset,
        data: new Uint8Array(length).fill(0xee),
      }),
      ErrorCode.OUT_OF_BOUNDS,
    );
  });

  it.each([
    ...outside,
    [0, BIG + 1],
    [0, -1],
    [4, -4],
    [0, 1.5],
    [0, Number.NaN],
  ])("dmaRead at %d of %d bytes: OUT_OF_BOUNDS", (offset, length) => {
    const { g, ctx, a } = setup();
    expectRefused(
      g,
      call({ op: "dmaRead", context: ctx, bo: a, offset, length }),
      ErrorCode.OUT_OF_BOUNDS,
    );
  });

  it.each([
    [BIG - 1, 0, 2],
    [0, SMALL - 1, 2],
    [0, 0, SMALL + 1],
    [-4, 0, 4],
    [0, -4, 4],
    [0, 0, -1],
    [2 ** 53 - 2, 0, 4],
    [0, Number.MAX_SAFE_INTEGER, 1],
    [Number.NaN, 0, 1],
    [0, 0, Infinity],
  ])("boCopy A@%d → B@%d of %d bytes: OUT_OF_BOUNDS", (srcOffset, dstOffset, length) => {
    const { g, ctx, a, b } = setup();
    expectRefused(
      g,
      call({ op: "boCopy", context: ctx, srcBo: a, srcOffset, dstBo: b, dstOffset, length }),
      ErrorCode.OUT_OF_BOUNDS,
    );
  });

  it.each([
    0,
    -1,
    -4096,
    0.5,
    4096.5,
    Number.NaN,
    Infinity,
    (16 << 20) + 1,
    2 ** 53,
    2 ** 60,
  ])("boAlloc of %d bytes: INVALID_SIZE", (sizeBytes) => {
    const { g, ctx } = setup();
    expectRefused(g, call({ op: "boAlloc", context: ctx, sizeBytes }), ErrorCode.INVALID_SIZE);
  });

  it("VRAM exhaustion: OUT_OF_MEMORY, and the space is usable again once freed", () => {
    const { backend, g, ctx } = setup({ device: { vramBytes: 64 << 10, maxBoBytes: 64 << 10 } });
    // setup holds 8 + 4 + 4 + 4 KiB.
    expect(backend.device.vram.usedBytes).toBe(20 << 10);
    const big = g.alloc(ctx, 40 << 10);
    expectRefused(
      g,
      call({ op: "boAlloc", context: ctx, sizeBytes: 4097 }),
      ErrorCode.OUT_OF_MEMORY,
    );
    expectRefused(
      g,
      call({ op: "boAlloc", context: ctx, sizeBytes: 64 << 10 }),
      ErrorCode.OUT_OF_MEMORY,
    );
    g.alloc(ctx, 4096); // exactly full
    expect(backend.device.vram.usedBytes).toBe(64 << 10);
    expectRefused(g, call({ op: "boAlloc", context: ctx, sizeBytes: 1 }), ErrorCode.OUT_OF_MEMORY);
    g.ok({ op: "boFree", context: ctx, bo: big });
    g.alloc(ctx, 40 << 10);
  });

  it("tenant VRAM quota: QUOTA_EXCEEDED on page-rounded bytes, shared by the tenant's sessions", () => {
    const tenants = new Map([
      [TEST_TENANT, { vramBytes: 32 << 10, bos: 100 }],
      [OTHER_TENANT, { vramBytes: 32 << 10, bos: 100 }],
    ]);
    const { backend, g, ctx, neighbour, neighbourCtx, stranger, strangerCtx } = setup({ tenants });
    // The tenant holds 8 + 4 (guest) + 4 (neighbour) = 16 KiB of 32.
    expect(backend.tenantUsage(TEST_TENANT)).toEqual({ vramBytes: 16 << 10, bos: 3, contexts: 2 });
    g.alloc(ctx, 12 << 10);
    // 4 KiB left: 4097 bytes is two pages.
    expectRefused(
      g,
      call({ op: "boAlloc", context: ctx, sizeBytes: 4097 }),
      ErrorCode.QUOTA_EXCEEDED,
    );
    expectRefused(
      neighbour,
      call({ op: "boAlloc", context: neighbourCtx, sizeBytes: 8192 }),
      ErrorCode.QUOTA_EXCEEDED,
    );
    neighbour.alloc(neighbourCtx, 4096); // the last page
    expectRefused(g, call({ op: "boAlloc", context: ctx, sizeBytes: 1 }), ErrorCode.QUOTA_EXCEEDED);
    stranger.alloc(strangerCtx, 16 << 10); // another tenant is not affected
  });

  it("tenant buffer-count quota: QUOTA_EXCEEDED", () => {
    const tenants = new Map([
      [TEST_TENANT, { vramBytes: 32 << 20, bos: 4 }],
      [OTHER_TENANT, { vramBytes: 32 << 20, bos: 4 }],
    ]);
    const { g, ctx, neighbour, neighbourCtx } = setup({ tenants });
    neighbour.alloc(neighbourCtx, 4096); // 4 of 4
    expectRefused(g, call({ op: "boAlloc", context: ctx, sizeBytes: 1 }), ErrorCode.QUOTA_EXCEEDED);
    const other = g.createContext();
    expectRefused(
      g,
      call({ op: "boAlloc", context: other, sizeBytes: 1 }),
      ErrorCode.QUOTA_EXCEEDED,
    );
    g.ok({ op: "boFree", context: ctx, bo: 2 });
    g.alloc(other, 1);
  });

  it("tenant context quota: QUOTA_EXCEEDED, shared by the tenant's sessions, freed on destroy", () => {
    const tenants = new Map([
      [TEST_TENANT, { vramBytes: 32 << 20, bos: 100, contexts: 3 }],
      [OTHER_TENANT, { vramBytes: 32 << 20, bos: 100, contexts: 1 }],
    ]);
    const { backend, g, neighbour, stranger, strangerCtx } = setup({ tenants });
    const third = g.createContext(); // guest 1 + neighbour 1 + this = 3 of 3
    expectRefused(g, call({ op: "contextCreate" }), ErrorCode.QUOTA_EXCEEDED);
    expectRefused(neighbour, call({ op: "contextCreate" }), ErrorCode.QUOTA_EXCEEDED);
    expectRefused(stranger, call({ op: "contextCreate" }), ErrorCode.QUOTA_EXCEEDED); // 1 of 1
    expect(backend.tenantUsage(TEST_TENANT).contexts).toBe(3);
    g.ok({ op: "contextDestroy", context: third });
    expect(neighbour.createContext()).toBeGreaterThan(third);
    stranger.ok({ op: "contextDestroy", context: strangerCtx });
    stranger.createContext();
    // Closing a session gives its contexts back.
    backend.closeSession("neighbour");
    expect(backend.tenantUsage(TEST_TENANT).contexts).toBe(1);
    g.createContext();
  });

  it("DMA above maxDmaBytes: LIMIT_EXCEEDED, even when it would fit the buffer", () => {
    const { g, ctx, a } = setup({ maxDmaBytes: 4096 });
    expectRefused(
      g,
      call({ op: "dmaWrite", context: ctx, bo: a, offset: 0, data: new Uint8Array(4097) }),
      ErrorCode.LIMIT_EXCEEDED,
    );
    expectRefused(
      g,
      call({ op: "dmaRead", context: ctx, bo: a, offset: 0, length: 4097 }),
      ErrorCode.LIMIT_EXCEEDED,
    );
    expectRefused(
      g,
      call({ op: "dmaRead", context: ctx, bo: a, offset: 0, length: 2 ** 53 }),
      ErrorCode.LIMIT_EXCEEDED,
    );
    expect(g.read(ctx, a, 4096, 4096)).toHaveLength(4096);
  });
});
