// Proves the library's surface: KERNELS maps each name to its spec with exactly the agreed slot
// layouts; and, for every kernel on random arguments (buffers drawn from a small pool, so some
// alias), validate() and work() never throw or mutate anything, and a launch that validate()
// accepts (within a work limit, as the device applies) writes only inside its buffers.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { KERNELS } from "./index.js";
import { f32ScalarArb, guardsIntact, makeBuffer, sameBytes, u32Arb } from "./test-support.js";
import type { KernelSpec } from "./types.js";

const EXPECTED_SLOTS: Record<string, string> = {
  fill: "dst:buffer n:u32 value:u32",
  copy: "dst:buffer src:buffer n:u32",
  add_u32: "dst:buffer a:buffer b:buffer n:u32",
  increment_u32: "buf:buffer n:u32 delta:u32",
  saxpy_f32: "y:buffer x:buffer n:u32 a:f32",
  gemm_f32: "c:buffer a:buffer b:buffer m:u32 n:u32 k:u32",
  reduce_sum_f32: "out:buffer in:buffer n:u32",
  stencil2d_f32: "dst:buffer src:buffer width:u32 height:u32 iterations:u32 alpha:f32",
  histogram_u32: "hist:buffer in:buffer n:u32 bins:u32",
};

const WORK_LIMIT = 200_000;

/** Scalars as numbers, buffer slots as { pool: index } into a pool built inside the property. */
type ArgPlan = number | { readonly pool: number };

function planArb(kernel: KernelSpec): fc.Arbitrary<ArgPlan[]> {
  const u32 = fc.oneof(
    { weight: 4, arbitrary: fc.nat({ max: 40 }) },
    { weight: 1, arbitrary: u32Arb },
  );
  const slotArbs = kernel.slots.map((slot): fc.Arbitrary<ArgPlan> => {
    if (slot.kind === "buffer") return fc.nat({ max: 2 }).map((pool) => ({ pool }));
    if (slot.kind === "f32") return f32ScalarArb;
    if (slot.kind === "i32") return fc.integer({ min: -0x80000000, max: 0x7fffffff });
    return u32;
  });
  return fc.tuple(...slotArbs);
}

describe("KERNELS", () => {
  it("holds exactly the agreed kernels, keyed by name, with the agreed slots", () => {
    const layouts: Record<string, string> = {};
    for (const [name, kernel] of KERNELS) {
      expect(kernel.name).toBe(name);
      layouts[name] = kernel.slots.map((slot) => `${slot.name}:${slot.kind}`).join(" ");
    }
    expect(layouts).toEqual(EXPECTED_SLOTS);
  });

  for (const kernel of KERNELS.values()) {
    it(`${kernel.name}: validate and work never mutate; accepted launches stay in bounds`, () => {
      fc.assert(
        fc.property(
          fc.array(fc.integer({ min: 0, max: 0xffffffff }), { maxLength: 64 }),
          fc.constantFrom(1, 2),
          planArb(kernel),
          (contents, pages, plan) => {
            const pool = [
              makeBuffer(1, 1, contents),
              makeBuffer(2, pages, contents.slice(3)),
              makeBuffer(3, 1),
            ];
            const args = plan.map((arg) => (typeof arg === "number" ? arg : pool[arg.pool]!));
            const frozen = Object.freeze(args.slice());
            const memories = pool.map((buffer) => buffer.memory.slice());
            const verdict = kernel.validate(frozen);
            const work = kernel.work(frozen);
            expect(pool.every((buffer, i) => sameBytes(buffer.memory, memories[i]!))).toBe(true);
            expect(frozen.every((arg, i) => Object.is(arg, args[i]))).toBe(true);
            expect(verdict === null || verdict.reason === "args").toBe(true);
            expect(work >= 0 && Number.isFinite(work)).toBe(true);
            if (verdict !== null || work > WORK_LIMIT) return;
            kernel.run(frozen);
            for (const buffer of pool) expect(guardsIntact(buffer)).toBe(true);
          },
        ),
        // A NaN scalar argument once tripped an === comparison in this test.
        {
          examples:
            kernel.name === "saxpy_f32" ? [[[], 1, [{ pool: 0 }, { pool: 0 }, 0, Number.NaN]]] : [],
        },
      );
    });
  }
});
