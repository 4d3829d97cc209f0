// Proves every kind of bad guest input is refused with its exact ErrorCode and changes no GPU
// state (DESIGN §4, §9): each case sends one bad frame on a backend holding data, dirty pages and
// other sessions, then checks the gpu digest, VRAM, quota usage and MMIO tracker are unchanged
// and only the session table moved; frames refused outright leave the whole state unchanged.
import {
  type Call,
  ErrorCode,
  errorName,
  type FrameBody,
  type KernelArg,
  type StoreBatch,
} from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { computeDigest } from "../digest.js";
import {
  OTHER_TENANT,
  storeBatch,
  TEST_TENANT,
  type TestBackendOverrides,
  TestGuest,
  testBackendOptions,
} from "../testing/test-guest.js";
import { Backend } from "./backend.js";

const BIG = 8192; // buffer A: mapped, with data
const SMALL = 4096; // buffer B: not mapped

/** A backend with data, dirty pages and three sessions (two of the guest's tenant). */
function setup(overrides: TestBackendOverrides = {}) {
  const backend = new Backend(testBackendOptions(overrides));
  const g = new TestGuest(backend, "guest", TEST_TENANT);
  const ctx = g.createContext();
  const a = g.alloc(ctx, BIG);
  const b = g.alloc(ctx, SMALL);
  const pattern = Uint8Array.from({ length: BIG }, (_, i) => (i * 7) & 0xff);
  g.write(ctx, a, 0, pattern.subarray(0, 4096));
  g.write(ctx, a, 4096, pattern.subarray(4096));
  g.write(ctx, b, 100, Uint8Array.of(5, 6, 7));
  g.map(ctx, a);
  g.store(ctx, a, [{ offset: 16, bytes: [1, 2, 3, 4] }]);
  const neighbour = new TestGuest(backend, "neighbour", TEST_TENANT);
  const neighbourCtx = neighbour.createContext();
  neighbour.alloc(neighbourCtx, SMALL);
  const stranger = new TestGuest(backend, "stranger", OTHER_TENANT);
  const strangerCtx = stranger.createContext();
  stranger.alloc(strangerCtx, SMALL);
  return { backend, g, ctx, a, b, neighbour, neighbourCtx, stranger, strangerCtx };
}

/** Everything but the session table that a refused call must leave alone. */
function gpuState(backend: Backend) {
  return {
    gpu: computeDigest(backend).gpu,
    vramUsedBytes: backend.device.vram.usedBytes,
    deviceBos: backend.device.boCount,
    deviceContexts: backend.device.contextCount,
    usage: [TEST_TENANT, OTHER_TENANT].map((t) => ({ ...backend.tenantUsage(t) })),
    pendingStores: backend.mmio.pendingStores,
    dirtyPages: backend.mmio.dirtyPageCount,
    nextContextHandle: backend.nextContextHandle,
  };
}

/** Sends `body` as g's next frame; it must be applied with `code` and change only the session table. */
function expectRefused(g: TestGuest, body: FrameBody, code: ErrorCode) {
  const before = gpuState(g.backend);
  const sessionsBefore = computeDigest(g.backend).sessions;
  const frame = g.session.lastFrame + 1;
  const outcome = g.send(body);
  expect(outcome.kind).toBe("applied");
  expect(errorName(outcome.result.code)).toBe(errorName(code));
  expect(outcome.result.output.kind).toBe("none");
  expect(gpuState(g.backend)).toEqual(before);
  // The frame counts as applied: the session moved on and cached the error reply.
  expect(g.session.lastFrame).toBe(frame);
  expect(g.session.replies.get(frame)).toBe(outcome.result);
  expect(computeDigest(g.backend).sessions).not.toBe(sessionsBefore);
  return outcome.result;
}

const call = (c: Call): FrameBody => ({ kind: "call", call: c });
const stores = (batch: StoreBatch): FrameBody => ({ kind: "stores", batch });
const buf = (bo: number): KernelArg => ({ kind: "buffer", bo });
const u32 = (value: number): KernelArg => ({ kind: "u32", value });
const f32 = (value: number): KernelArg => ({ kind: "f32", value });
const launch = (context: number, kernel: string, args: KernelArg[]) =>
  call({ op: "kernelLaunch", context, kernel, args });

describe("handles the guest may not name", () => {
  it("unknown context: UNKNOWN_CONTEXT for every call that names one", () => {
    const { g, a } = setup();
    for (const context of [99, 0, -1, 2 ** 32, 1.5]) {
      expectRefused(g, call({ op: "fence", context }), ErrorCode.UNKNOWN_CONTEXT);
      expectRefused(g, call({ op: "contextDestroy", context }), ErrorCode.UNKNOWN_CONTEXT);
      expectRefused(
        g,
        call({ op: "boAlloc", context, sizeBytes: 4096 }),
        ErrorCode.UNKNOWN_CONTEXT,
      );
      expectRefused(g, call({ op: "boMap", context, bo: a }), ErrorCode.UNKNOWN_CONTEXT);
      expectRefused(
        g,
        launch(context, "fill", [buf(a), u32(1), u32(1)]),
        ErrorCode.UNKNOWN_CONTEXT,
      );
      expectRefused(
        g,
        stores(storeBatch(context, a, [{ offset: 0, bytes: [1] }])),
        ErrorCode.UNKNOWN_CONTEXT,
      );
    }
  });

  it("another session's context looks exactly like an unknown one (same tenant or not)", () => {
    const { g, neighbour, neighbourCtx, stranger, strangerCtx } = setup();
    const probes = (context: number): Call[] => [
      { op: "fence", context },
      { op: "contextDestroy", context },
      { op: "boAlloc", context, sizeBytes: 4096 },
      { op: "dmaRead", context, bo: 1, offset: 0, length: 4 },
      { op: "dmaWrite", context, bo: 1, offset: 0, data: Uint8Array.of(9) },
      { op: "boFree", context, bo: 1 },
    ];
    const whileLive = [neighbourCtx, strangerCtx].flatMap((c) =>
      probes(c).map((p) => expectRefused(g, call(p), ErrorCode.UNKNOWN_CONTEXT)),
    );
    // The same calls once those contexts are gone: identical replies, message included.
    neighbour.ok({ op: "contextDestroy", context: neighbourCtx });
    stranger.ok({ op: "contextDestroy", context: strangerCtx });
    const whenGone = [neighbourCtx, strangerCtx].flatMap((c) =>
      probes(c).map((p) => expectRefused(g, call(p), ErrorCode.UNKNOWN_CONTEXT)),
    );
    expect(whileLive).toEqual(whenGone);
  });

  it("unknown buffer: UNKNOWN_BO in every call that names one", () => {
    const { g, ctx, a } = setup();
    for (const bo of [99, 0, -1, 3]) {
      expectRefused(g, call({ op: "boFree", context: ctx, bo }), ErrorCode.UNKNOWN_BO);
      expectRefused(g, call({ op: "boMap", context: ctx, bo }), ErrorCode.UNKNOWN_BO);
      expectRefused(g, call({ op: "boUnmap", context: ctx, bo }), ErrorCode.UNKNOWN_BO);
      expectRefused(
        g,
        call({ op: "dmaWrite", context: ctx, bo, offset: 0, data: Uint8Array.of(1) }),
        ErrorCode.UNKNOWN_BO,
      );
      expectRefused(
        g,
        call({ op: "dmaRead", context: ctx, bo, offset: 0, length: 1 }),
        ErrorCode.UNKNOWN_BO,
      );
      for (const [srcBo, dstBo] of [
        [a, bo],
        [bo, a],
      ]) {
        expectRefused(
          g,
          call({
            op: "boCopy",
            context: ctx,
            srcBo: srcBo!,
            srcOffset: 0,
            dstBo: dstBo!,
            dstOffset: 0,
            length: 4,
          }),
          ErrorCode.UNKNOWN_BO,
        );
      }
      expectRefused(g, launch(ctx, "copy", [buf(a), buf(bo), u32(1)]), ErrorCode.UNKNOWN_BO);
      expectRefused(
        g,
        stores(storeBatch(ctx, bo, [{ offset: 0, bytes: [1] }])),
        ErrorCode.UNKNOWN_BO,
      );
    }
  });

  it("a buffer of another context is unknown in this one, even with the same session", () => {
    const { g, ctx, b } = setup();
    const second = g.createContext();
    const only = g.alloc(second, SMALL); // handle 1 in `second`; `b` (handle 2) lives in `ctx` only
    expect(only).toBe(1);
    const probe = call({ op: "dmaRead", context: second, bo: b, offset: 0, length: 4 });
    const live = expectRefused(g, probe, ErrorCode.UNKNOWN_BO);
    g.ok({ op: "boFree", context: ctx, bo: b });
    expect(expectRefused(g, probe, ErrorCode.UNKNOWN_BO)).toEqual(live);
    expectRefused(g, launch(second, "fill", [buf(b), u32(1), u32(1)]), ErrorCode.UNKNOWN_BO);
  });
});

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

describe("kernel launches", () => {
  it("unknown kernel: UNKNOWN_KERNEL", () => {
    const { g, ctx, a } = setup();
    for (const name of ["nope", "", "FILL", "fill ", "__proto__", "constructor"]) {
      expectRefused(g, launch(ctx, name, [buf(a), u32(1), u32(1)]), ErrorCode.UNKNOWN_KERNEL);
    }
  });

  it("wrong argument count: BAD_KERNEL_ARGS", () => {
    const { g, ctx, a, b } = setup();
    expectRefused(g, launch(ctx, "fill", []), ErrorCode.BAD_KERNEL_ARGS);
    expectRefused(g, launch(ctx, "fill", [buf(a), u32(1)]), ErrorCode.BAD_KERNEL_ARGS);
    expectRefused(
      g,
      launch(ctx, "fill", [buf(a), u32(1), u32(1), u32(1)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(g, launch(ctx, "copy", [buf(a), buf(b)]), ErrorCode.BAD_KERNEL_ARGS);
  });

  it("wrong slot type: a scalar in a buffer slot, a buffer in a scalar slot", () => {
    const { g, ctx, a, b } = setup();
    expectRefused(g, launch(ctx, "fill", [u32(a), u32(1), u32(1)]), ErrorCode.BAD_KERNEL_ARGS);
    expectRefused(g, launch(ctx, "fill", [buf(a), buf(b), u32(1)]), ErrorCode.BAD_KERNEL_ARGS);
    expectRefused(
      g,
      launch(ctx, "saxpy_f32", [buf(a), buf(b), u32(1), u32(1)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "saxpy_f32", [buf(a), buf(b), f32(1), f32(1)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "increment_u32", [buf(a), { kind: "i32", value: 1 }, u32(1)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
  });

  it("buffer too small for n: BAD_KERNEL_ARGS", () => {
    const { g, ctx, a, b } = setup();
    // A holds 2048 u32 elements, B 1024.
    expectRefused(g, launch(ctx, "fill", [buf(a), u32(2049), u32(1)]), ErrorCode.BAD_KERNEL_ARGS);
    expectRefused(
      g,
      launch(ctx, "increment_u32", [buf(b), u32(1025), u32(1)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(g, launch(ctx, "copy", [buf(a), buf(b), u32(1025)]), ErrorCode.BAD_KERNEL_ARGS);
    expectRefused(
      g,
      launch(ctx, "gemm_f32", [buf(a), buf(b), buf(b), u32(64), u32(64), u32(1)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "gemm_f32", [buf(a), buf(b), buf(b), u32(65536), u32(65536), u32(0)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
  });

  it("forbidden aliasing (gemm c==a, c==b; reduce, stencil, histogram): BAD_KERNEL_ARGS", () => {
    const { g, ctx, a, b } = setup();
    const one = u32(1);
    expectRefused(
      g,
      launch(ctx, "gemm_f32", [buf(a), buf(a), buf(b), one, one, one]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "gemm_f32", [buf(a), buf(b), buf(a), one, one, one]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "reduce_sum_f32", [buf(a), buf(a), one]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "stencil2d_f32", [buf(a), buf(a), one, one, one, f32(0.5)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "histogram_u32", [buf(a), buf(a), one, one]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    // a may alias b in gemm: that one runs.
    g.ok({
      op: "kernelLaunch",
      context: ctx,
      kernel: "gemm_f32",
      args: [buf(a), buf(b), buf(b), one, one, one],
    });
  });

  it("scalar out of range (u32 -1, 2^32, 0.5, NaN; f32 0.1, 1e40): BAD_KERNEL_ARGS", () => {
    const { g, ctx, a, b } = setup();
    for (const value of [-1, 2 ** 32, 0.5, Number.NaN, Infinity]) {
      expectRefused(
        g,
        launch(ctx, "fill", [buf(a), u32(1), u32(value)]),
        ErrorCode.BAD_KERNEL_ARGS,
      );
      expectRefused(
        g,
        launch(ctx, "fill", [buf(a), u32(value), u32(1)]),
        ErrorCode.BAD_KERNEL_ARGS,
      );
    }
    for (const value of [0.1, 1e40, -1e-50, 1 / 3]) {
      expectRefused(
        g,
        launch(ctx, "saxpy_f32", [buf(a), buf(b), u32(1), f32(value)]),
        ErrorCode.BAD_KERNEL_ARGS,
      );
    }
    // Exact float32 values (and NaN) are fine.
    g.ok({
      op: "kernelLaunch",
      context: ctx,
      kernel: "saxpy_f32",
      args: [buf(a), buf(b), u32(1), f32(Math.fround(0.1))],
    });
  });

  it("work above maxKernelWork: LIMIT_EXCEEDED", () => {
    const { g, ctx, a, b } = setup({ device: { maxKernelWork: 1000 } });
    expectRefused(g, launch(ctx, "fill", [buf(a), u32(1001), u32(1)]), ErrorCode.LIMIT_EXCEEDED);
    expectRefused(
      g,
      launch(ctx, "gemm_f32", [buf(a), buf(b), buf(b), u32(10), u32(10), u32(11)]),
      ErrorCode.LIMIT_EXCEEDED,
    );
    expectRefused(
      g,
      launch(ctx, "histogram_u32", [buf(a), buf(b), u32(1000), u32(1)]),
      ErrorCode.LIMIT_EXCEEDED,
    );
    g.ok({ op: "kernelLaunch", context: ctx, kernel: "fill", args: [buf(a), u32(1000), u32(1)] });
  });
});

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

describe("frames", () => {
  it("out of order (gap, zero, negative, fractional, NaN): FRAME_OUT_OF_ORDER, nothing changes", () => {
    const { backend, g, ctx, a } = setup();
    const increment = launch(ctx, "increment_u32", [buf(a), u32(4), u32(1)]);
    const next = g.session.lastFrame + 1;
    const before = computeDigest(backend);
    for (const number of [
      next + 1,
      next + 1000,
      0,
      -1,
      next - 0.5,
      next + 0.5,
      Number.NaN,
      Infinity,
    ]) {
      const outcome = g.sendAs(number, increment);
      expect(outcome.kind).toBe("rejected");
      expect(outcome.result.code).toBe(
        number <= next - 1 ? ErrorCode.FRAME_REPEATED : ErrorCode.FRAME_OUT_OF_ORDER,
      );
    }
    for (const number of [next + 1, next + 1000, next + 0.5, Number.NaN, Infinity]) {
      expect(g.sendAs(number, increment).result.code).toBe(ErrorCode.FRAME_OUT_OF_ORDER);
    }
    expect(computeDigest(backend)).toEqual(before);
    expect(g.session.lastFrame).toBe(next - 1);
    expect(g.sendAs(next, increment).kind).toBe("applied");
  });

  it("a repeated frame with a cached reply gets that same reply object and runs nothing", () => {
    const { backend, g, ctx, a } = setup();
    const first = g.read(ctx, a, 0, 4);
    const frame = g.session.lastFrame + 1;
    const body = launch(ctx, "increment_u32", [buf(a), u32(1), u32(5)]);
    const applied = g.sendAs(frame, body);
    expect(applied.kind).toBe("applied");
    const read = g.session.lastFrame + 1;
    const readBody = call({ op: "dmaRead", context: ctx, bo: a, offset: 0, length: 4 });
    const readReply = g.sendAs(read, readBody);
    const before = computeDigest(backend);
    for (let i = 0; i < 3; i++) {
      const again = g.sendAs(frame, body);
      expect(again.kind).toBe("duplicate");
      expect(again.result).toBe(applied.result);
      const readAgain = g.sendAs(read, readBody);
      expect(readAgain.kind).toBe("duplicate");
      expect(readAgain.result).toBe(readReply.result);
    }
    expect(computeDigest(backend)).toEqual(before);
    // Incremented by 5 once, not four times.
    const word = (bytes: Uint8Array) =>
      new DataView(bytes.buffer, bytes.byteOffset).getUint32(0, true);
    expect(word(backend.contexts.get(ctx)!.bos.get(a)!.bo.bytes)).toBe((word(first) + 5) >>> 0);
  });

  it("a repeated frame whose reply was evicted (by count or bytes): FRAME_REPEATED, nothing changes", () => {
    for (const session of [
      { replyCacheFrames: 2 },
      { replyCacheFrames: 100, replyCacheBytes: 8 },
    ]) {
      const { backend, g, ctx, a } = setup({ session });
      const frame = g.session.lastFrame + 1;
      const body = launch(ctx, "increment_u32", [buf(a), u32(1), u32(5)]);
      expect(g.sendAs(frame, body).kind).toBe("applied");
      g.read(ctx, a, 0, 16); // 16 reply bytes: above the byte limit
      g.ok({ op: "fence", context: ctx });
      g.ok({ op: "fence", context: ctx });
      expect(g.session.replies.has(frame)).toBe(false);
      const before = computeDigest(backend);
      const again = g.sendAs(frame, body);
      expect(again.kind).toBe("rejected");
      expect(again.result.code).toBe(ErrorCode.FRAME_REPEATED);
      expect(computeDigest(backend)).toEqual(before);
    }
  });

  it("unknown tenant at openSession: UNAUTHENTICATED, no session made", () => {
    const { backend } = setup();
    const before = computeDigest(backend);
    for (const tenant of ["nobody", "", "T1", "__proto__"]) {
      const result = backend.openSession(`s-${tenant}`, tenant);
      expect("code" in result && result.code).toBe(ErrorCode.UNAUTHENTICATED);
      expect(backend.sessions.has(`s-${tenant}`)).toBe(false);
    }
    expect(computeDigest(backend)).toEqual(before);
  });
});
