// Proves increment_u32 adds delta mod 2^32 to buf[0, n) and nothing else, against a naive
// BigInt reference on random inputs; that applying it twice adds twice (not idempotent); and
// that validate rejects overruns.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { incrementU32Kernel } from "./increment-u32.js";
import {
  bitsDiff,
  guardsIntact,
  makeBuffer,
  PAGE_ELEMENTS,
  snapshot,
  u32Arb,
} from "./test-support.js";

function reference(before: Uint32Array, n: number, delta: number): Uint32Array {
  const after = before.slice();
  for (let i = 0; i < n; i++) after[i] = Number((BigInt(after[i]!) + BigInt(delta)) % 2n ** 32n);
  return after;
}

function check(contents: readonly number[], n: number, delta: number) {
  const buf = makeBuffer(1, 1, contents);
  const expected = reference(snapshot(buf), n, delta);
  const args = [buf, n, delta];
  expect(incrementU32Kernel.validate(args)).toBeNull();
  incrementU32Kernel.run(args);
  expect(bitsDiff(buf.u32, expected)).toBeNull();
  expect(guardsIntact(buf)).toBe(true);
}

describe("increment_u32", () => {
  it("matches the reference on random inputs", () => {
    fc.assert(
      fc.property(
        fc.array(u32Arb, { maxLength: 64 }),
        fc.nat({ max: PAGE_ELEMENTS }),
        u32Arb,
        (contents, n, delta) => check(contents, n, delta),
      ),
    );
  });

  it("handles n = 0, 1 and the whole buffer", () => {
    for (const n of [0, 1, PAGE_ELEMENTS]) check([0xffffffff, 5], n, 0xffffffff);
  });

  it("is not idempotent", () => {
    const buf = makeBuffer(1, 1, [10, 20]);
    incrementU32Kernel.run([buf, 2, 3]);
    incrementU32Kernel.run([buf, 2, 3]);
    expect([buf.u32[0], buf.u32[1], buf.u32[2]]).toEqual([16, 26, 0]);
  });

  it("rejects n beyond the buffer", () => {
    const buf = makeBuffer(1, 1);
    expect(incrementU32Kernel.validate([buf, PAGE_ELEMENTS + 1, 1])?.reason).toBe("args");
    expect(incrementU32Kernel.work([buf, 12, 1])).toBe(12);
  });
});
