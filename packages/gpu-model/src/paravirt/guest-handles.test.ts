// Proves the guest-handle rules the replicated handle tables rely on: context handles come from
// one backend-wide counter, buffer handles from a counter per context (so two contexts both get
// buffer 1), and neither is ever reused after free, destroy or session close — checked on fixed
// histories and on random create/destroy/alloc/free sequences across sessions.
import { ErrorCode } from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { OTHER_TENANT, TEST_TENANT, TestGuest, testBackendOptions } from "../testing/test-guest.js";
import { Backend } from "./backend.js";

describe("context handles", () => {
  it("come from one counter across sessions and tenants, starting at 1", () => {
    const backend = new Backend(testBackendOptions());
    const a = new TestGuest(backend, "a", TEST_TENANT);
    const b = new TestGuest(backend, "b", OTHER_TENANT);
    expect([a.createContext(), b.createContext(), a.createContext(), b.createContext()]).toEqual([
      1, 2, 3, 4,
    ]);
  });

  it("are never reused after destroy or session close", () => {
    const backend = new Backend(testBackendOptions());
    const a = new TestGuest(backend, "a");
    const b = new TestGuest(backend, "b");
    const first = a.createContext();
    a.ok({ op: "contextDestroy", context: first });
    expect(b.createContext()).toBe(2);
    a.createContext();
    backend.closeSession("a");
    expect(b.createContext()).toBe(4);
    expect(new TestGuest(backend, "a").createContext()).toBe(5);
  });
});

describe("buffer handles", () => {
  it("are per context: two contexts both get buffer 1, 2, …", () => {
    const backend = new Backend(testBackendOptions());
    const g = new TestGuest(backend, "g");
    const h = new TestGuest(backend, "h");
    const [c1, c2, c3] = [g.createContext(), g.createContext(), h.createContext()];
    expect([g.alloc(c1, 10), g.alloc(c2, 10), h.alloc(c3, 10)]).toEqual([1, 1, 1]);
    expect([g.alloc(c2, 10), g.alloc(c1, 10)]).toEqual([2, 2]);
    // Same guest handle, different buffers.
    g.write(c1, 1, 0, Uint8Array.of(1));
    g.write(c2, 1, 0, Uint8Array.of(2));
    expect([g.read(c1, 1, 0, 1)[0], g.read(c2, 1, 0, 1)[0]]).toEqual([1, 2]);
  });

  it("are never reused after free; failed allocations take none", () => {
    const backend = new Backend(testBackendOptions());
    const g = new TestGuest(backend, "g");
    const ctx = g.createContext();
    expect([g.alloc(ctx, 1), g.alloc(ctx, 1)]).toEqual([1, 2]);
    g.ok({ op: "boFree", context: ctx, bo: 1 });
    g.ok({ op: "boFree", context: ctx, bo: 2 });
    expect(g.call({ op: "boAlloc", context: ctx, sizeBytes: 0 }).code).toBe(ErrorCode.INVALID_SIZE);
    expect(g.alloc(ctx, 1)).toBe(3);
    // Freed handles stay unknown.
    expect(g.call({ op: "dmaRead", context: ctx, bo: 1, offset: 0, length: 1 }).code).toBe(
      ErrorCode.UNKNOWN_BO,
    );
  });

  it("restart at 1 in a new context (a destroyed context's handles die with it)", () => {
    const backend = new Backend(testBackendOptions());
    const g = new TestGuest(backend, "g");
    const old = g.createContext();
    g.alloc(old, 1);
    g.alloc(old, 1);
    g.ok({ op: "contextDestroy", context: old });
    const fresh = g.createContext();
    expect(fresh).not.toBe(old);
    expect(g.alloc(fresh, 1)).toBe(1);
  });
});

type Op =
  | { kind: "create"; guest: number }
  | { kind: "destroy"; guest: number; pick: number }
  | { kind: "alloc"; guest: number; pick: number }
  | { kind: "free"; guest: number; pick: number; bo: number }
  | { kind: "close"; guest: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("create" as const), guest: fc.nat(2) }),
  fc.record({ kind: fc.constant("destroy" as const), guest: fc.nat(2), pick: fc.nat() }),
  fc.record({ kind: fc.constant("alloc" as const), guest: fc.nat(2), pick: fc.nat() }),
  fc.record({ kind: fc.constant("alloc" as const), guest: fc.nat(2), pick: fc.nat() }),
  fc.record({ kind: fc.constant("free" as const), guest: fc.nat(2), pick: fc.nat(), bo: fc.nat() }),
  fc.record({ kind: fc.constant("close" as const), guest: fc.nat(2) }),
);

describe("on random histories", () => {
  it("context handles strictly increase; buffer handles strictly increase per context", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 120 }), (ops) => {
        const backend = new Backend(testBackendOptions());
        let opened = 0;
        const open = () => new TestGuest(backend, `s${opened++}`);
        const guests = [open(), open(), open()];
        const contextsSeen: number[] = [];
        const bosSeen = new Map<number, number[]>();
        const live = (i: number) => [...guests[i]!.session.contexts];
        for (const op of ops) {
          const g = guests[op.guest]!;
          const mine = live(op.guest);
          const chosen = mine[("pick" in op ? op.pick : 0) % Math.max(mine.length, 1)];
          if (op.kind === "create") {
            const handle = g.createContext();
            contextsSeen.push(handle);
            bosSeen.set(handle, []);
          } else if (op.kind === "close") {
            backend.closeSession(g.session.id);
            guests[op.guest] = open();
          } else if (chosen !== undefined && op.kind === "destroy") {
            g.ok({ op: "contextDestroy", context: chosen });
          } else if (chosen !== undefined && op.kind === "alloc") {
            bosSeen.get(chosen)!.push(g.alloc(chosen, 1));
          } else if (chosen !== undefined && op.kind === "free") {
            const bos = [...backend.contexts.get(chosen)!.bos.keys()];
            if (bos.length > 0)
              g.ok({ op: "boFree", context: chosen, bo: bos[op.bo % bos.length]! });
          }
        }
        expect(contextsSeen).toEqual(contextsSeen.map((_, i) => i + 1));
        for (const bos of bosSeen.values()) expect(bos).toEqual(bos.map((_, i) => i + 1));
      }),
      { numRuns: 150 },
    );
  });
});
