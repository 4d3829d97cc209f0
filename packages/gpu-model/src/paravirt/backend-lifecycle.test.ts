// Proves resource life cycles through the backend: new buffers read as zeros (also in reused
// VRAM), sizes are page-rounded, VRAM, device and tenant accounting return to zero after frees,
// context destroys and session close (fixed and random histories), closeSession destroys only
// that session's contexts, and calls do what they say (fences count, reads copy, copies overlap).
import { ErrorCode } from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { computeDigest } from "../digest.js";
import { OTHER_TENANT, TEST_TENANT, TestGuest, testBackendOptions } from "../testing/test-guest.js";
import { Backend } from "./backend.js";

function accounting(backend: Backend) {
  return {
    vramUsedBytes: backend.device.vram.usedBytes,
    deviceBos: backend.device.boCount,
    deviceContexts: backend.device.contextCount,
    t1: { ...backend.tenantUsage(TEST_TENANT) },
    t2: { ...backend.tenantUsage(OTHER_TENANT) },
  };
}

const EMPTY = {
  vramUsedBytes: 0,
  deviceBos: 0,
  deviceContexts: 0,
  t1: { vramBytes: 0, bos: 0, contexts: 0 },
  t2: { vramBytes: 0, bos: 0, contexts: 0 },
};

describe("buffers", () => {
  it("read as zeros when new, even in VRAM a freed buffer filled", () => {
    const backend = new Backend(testBackendOptions({ device: { vramBytes: 64 << 10 } }));
    const g = new TestGuest(backend, "g");
    const ctx = g.createContext();
    for (let round = 0; round < 3; round++) {
      const bo = g.alloc(ctx, 64 << 10); // all of VRAM
      expect(g.read(ctx, bo, 0, 64 << 10).every((x) => x === 0)).toBe(true);
      g.write(ctx, bo, 0, new Uint8Array(64 << 10).fill(0xff));
      g.ok({
        op: "kernelLaunch",
        context: ctx,
        kernel: "fill",
        args: [
          { kind: "buffer", bo },
          { kind: "u32", value: 16 },
          { kind: "u32", value: 7 },
        ],
      });
      g.ok({ op: "boFree", context: ctx, bo });
    }
  });

  it("are page-rounded: the guest sees the rounded size", () => {
    const backend = new Backend(testBackendOptions());
    const g = new TestGuest(backend, "g");
    const ctx = g.createContext();
    const bo = g.alloc(ctx, 1);
    expect(g.read(ctx, bo, 0, 4096)).toHaveLength(4096);
    expect(g.call({ op: "dmaRead", context: ctx, bo, offset: 0, length: 4097 }).code).toBe(
      ErrorCode.OUT_OF_BOUNDS,
    );
    const two = g.alloc(ctx, 4097);
    expect(backend.tenantUsage(TEST_TENANT)).toEqual({ vramBytes: 3 * 4096, bos: 2, contexts: 1 });
    expect(g.read(ctx, two, 8191, 1)).toEqual(Uint8Array.of(0));
  });
});

describe("accounting", () => {
  it("returns to zero after frees, destroys and session close", () => {
    const backend = new Backend(testBackendOptions());
    const a = new TestGuest(backend, "a", TEST_TENANT);
    const b = new TestGuest(backend, "b", OTHER_TENANT);
    const ca = a.createContext();
    const cb = b.createContext();
    const cb2 = b.createContext();
    const bos = [a.alloc(ca, 1), a.alloc(ca, 5000), a.alloc(ca, 64 << 10)];
    b.alloc(cb, 100);
    b.alloc(cb2, 8192);
    expect(accounting(backend)).toEqual({
      vramUsedBytes: (1 + 2 + 16 + 1 + 2) * 4096,
      deviceBos: 5,
      deviceContexts: 3,
      t1: { vramBytes: 19 * 4096, bos: 3, contexts: 1 },
      t2: { vramBytes: 3 * 4096, bos: 2, contexts: 2 },
    });
    for (const bo of bos) a.ok({ op: "boFree", context: ca, bo });
    a.ok({ op: "contextDestroy", context: ca });
    b.ok({ op: "contextDestroy", context: cb });
    expect(accounting(backend)).toEqual({
      ...EMPTY,
      vramUsedBytes: 2 * 4096,
      deviceBos: 1,
      deviceContexts: 1,
      t2: { vramBytes: 2 * 4096, bos: 1, contexts: 1 },
    });
    backend.closeSession("b");
    backend.closeSession("a");
    expect(accounting(backend)).toEqual(EMPTY);
    expect(backend.sessions.size).toBe(0);
    expect(backend.contexts.size).toBe(0);
  });

  it("returns to zero on random histories once every session is closed", () => {
    const opArb = fc.record({
      guest: fc.nat(2),
      what: fc.constantFrom("ctx", "alloc", "alloc", "alloc", "free", "destroy", "close"),
      n: fc.nat(),
    });
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 80 }), (ops) => {
        const backend = new Backend(testBackendOptions({ device: { vramBytes: 1 << 20 } }));
        let opened = 0;
        const open = (i: number) =>
          new TestGuest(backend, `s${opened++}`, i === 0 ? OTHER_TENANT : TEST_TENANT);
        const guests = [0, 1, 2].map(open);
        for (const { guest, what, n } of ops) {
          const g = guests[guest]!;
          const contexts = [...g.session.contexts];
          const ctx = contexts[n % Math.max(contexts.length, 1)];
          if (what === "ctx") g.createContext();
          else if (what === "close") {
            backend.closeSession(g.session.id);
            guests[guest] = open(guest);
          } else if (ctx === undefined) continue;
          else if (what === "alloc") {
            // May fail with OUT_OF_MEMORY: a failure must not leak accounting either.
            g.call({ op: "boAlloc", context: ctx, sizeBytes: 1 + (n % (96 << 10)) });
          } else if (what === "destroy") g.ok({ op: "contextDestroy", context: ctx });
          else {
            const bos = [...backend.contexts.get(ctx)!.bos.keys()];
            if (bos.length > 0) g.ok({ op: "boFree", context: ctx, bo: bos[n % bos.length]! });
          }
          // Tenant usage always equals what the tenant's live buffers hold.
          let liveBytes = 0;
          for (const c of backend.contexts.values()) {
            for (const gbo of c.bos.values()) liveBytes += gbo.bo.byteLength;
          }
          const usage = accounting(backend);
          expect(usage.t1.vramBytes + usage.t2.vramBytes).toBe(liveBytes);
          expect(usage.vramUsedBytes).toBe(liveBytes);
        }
        for (const g of guests) backend.closeSession(g.session.id);
        expect(accounting(backend)).toEqual(EMPTY);
      }),
      { numRuns: 100 },
    );
  });
});

describe("sessions", () => {
  it("closeSession destroys that session's contexts and nothing else", () => {
    const backend = new Backend(testBackendOptions());
    const a = new TestGuest(backend, "a");
    const b = new TestGuest(backend, "b");
    const a1 = a.createContext();
    const b1 = b.createContext();
    const a2 = a.createContext();
    a.alloc(a1, 4096);
    a.alloc(a2, 4096);
    const kept = b.alloc(b1, 4096);
    b.write(b1, kept, 0, Uint8Array.of(42));
    backend.closeSession("a");
    expect([...backend.contexts.keys()]).toEqual([b1]);
    expect(backend.sessions.has("a")).toBe(false);
    expect(backend.device.contextCount).toBe(1);
    expect(b.read(b1, kept, 0, 1)).toEqual(Uint8Array.of(42));
    expect(backend.tenantUsage(TEST_TENANT)).toEqual({ vramBytes: 4096, bos: 1, contexts: 1 });
  });

  it("closing an unknown session changes nothing; a closed id opens afresh", () => {
    const backend = new Backend(testBackendOptions());
    const a = new TestGuest(backend, "a");
    a.createContext();
    const before = computeDigest(backend);
    backend.closeSession("nobody");
    expect(computeDigest(backend)).toEqual(before);
    backend.closeSession("a");
    backend.closeSession("a");
    const again = new TestGuest(backend, "a");
    expect(again.session.lastFrame).toBe(0);
    expect(again.send({ kind: "call", call: { op: "contextCreate" } }).kind).toBe("applied");
  });
});

describe("calls", () => {
  it("fence values count up per context", () => {
    const g = new TestGuest(new Backend(testBackendOptions()), "g");
    const [c1, c2] = [g.createContext(), g.createContext()];
    const fence = (context: number) => g.ok({ op: "fence", context }).output;
    expect([fence(c1), fence(c1), fence(c2), fence(c1)]).toEqual([
      { kind: "fence", value: 1 },
      { kind: "fence", value: 2 },
      { kind: "fence", value: 1 },
      { kind: "fence", value: 3 },
    ]);
  });

  it("dmaRead returns a copy; boCopy within one buffer overlaps like memmove", () => {
    const backend = new Backend(testBackendOptions());
    const g = new TestGuest(backend, "g");
    const ctx = g.createContext();
    const bo = g.alloc(ctx, 4096);
    g.write(ctx, bo, 0, Uint8Array.of(1, 2, 3, 4, 5, 6));
    const data = g.read(ctx, bo, 0, 6);
    data.fill(0);
    expect(g.read(ctx, bo, 0, 6)).toEqual(Uint8Array.of(1, 2, 3, 4, 5, 6));
    g.ok({
      op: "boCopy",
      context: ctx,
      srcBo: bo,
      srcOffset: 0,
      dstBo: bo,
      dstOffset: 2,
      length: 4,
    });
    expect(g.read(ctx, bo, 0, 6)).toEqual(Uint8Array.of(1, 2, 1, 2, 3, 4));
    g.ok({
      op: "boCopy",
      context: ctx,
      srcBo: bo,
      srcOffset: 2,
      dstBo: bo,
      dstOffset: 0,
      length: 4,
    });
    expect(g.read(ctx, bo, 0, 6)).toEqual(Uint8Array.of(1, 2, 3, 4, 3, 4));
  });

  it("stores write little-endian data of each width at their offsets, in order", () => {
    const g = new TestGuest(new Backend(testBackendOptions()), "g");
    const ctx = g.createContext();
    const bo = g.alloc(ctx, 8192);
    g.map(ctx, bo);
    g.store(ctx, bo, [
      { offset: 0, bytes: [1] },
      { offset: 2, bytes: [2, 3] },
      { offset: 4, bytes: [4, 5, 6, 7] },
      { offset: 8, bytes: [8, 9, 10, 11, 12, 13, 14, 15] },
      { offset: 4, bytes: [0xee] }, // later stores win
      { offset: 8184, bytes: [1, 1, 1, 1, 1, 1, 1, 1] },
    ]);
    expect(g.read(ctx, bo, 0, 16)).toEqual(
      Uint8Array.of(1, 0, 2, 3, 0xee, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
    );
    expect(g.read(ctx, bo, 8184, 8)).toEqual(new Uint8Array(8).fill(1));
  });
});
