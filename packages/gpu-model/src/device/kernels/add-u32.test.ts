// Proves add_u32 computes (a[i] + b[i]) mod 2^32 into dst[0, n) and nothing else, against a
// naive BigInt reference on random inputs and sizes, including every aliasing of dst, a and b;
// and that validate rejects overruns of any buffer.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { addU32Kernel } from "./add-u32.js";
import {
  bitsDiff,
  guardsIntact,
  makeBuffer,
  PAGE_ELEMENTS,
  snapshot,
  type TestBuffer,
  u32Arb,
} from "./test-support.js";

function reference(dst: Uint32Array, a: Uint32Array, b: Uint32Array, n: number): Uint32Array {
  const after = dst.slice();
  for (let i = 0; i < n; i++) after[i] = Number((BigInt(a[i]!) + BigInt(b[i]!)) % 2n ** 32n);
  return after;
}

// Which of dst, a, b are the same buffer: 0 none, 1 dst=a, 2 dst=b, 3 a=b, 4 all three.
function buffersFor(aliasing: number, bits: number[][]): [TestBuffer, TestBuffer, TestBuffer] {
  const x = makeBuffer(1, 1, bits[0]);
  const y = makeBuffer(2, 1, bits[1]);
  const z = makeBuffer(3, 1, bits[2]);
  switch (aliasing) {
    case 1:
      return [x, x, y];
    case 2:
      return [x, y, x];
    case 3:
      return [x, y, y];
    case 4:
      return [x, x, x];
    default:
      return [x, y, z];
  }
}

function check(aliasing: number, bits: number[][], n: number) {
  const [dst, a, b] = buffersFor(aliasing, bits);
  const expected = reference(snapshot(dst), snapshot(a), snapshot(b), n);
  const args = [dst, a, b, n];
  expect(addU32Kernel.validate(args)).toBeNull();
  addU32Kernel.run(args);
  expect(bitsDiff(dst.u32, expected)).toBeNull();
  expect(guardsIntact(dst) && guardsIntact(a) && guardsIntact(b)).toBe(true);
}

describe("add_u32", () => {
  it("matches the reference on random inputs and aliasings", () => {
    const bits = fc.array(u32Arb, { maxLength: 40 });
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4 }),
        fc.tuple(bits, bits, bits),
        fc.nat({ max: 48 }),
        (aliasing, contents, n) => check(aliasing, contents, n),
      ),
    );
  });

  it("handles n = 0, 1 and the whole buffer", () => {
    const bits = [[0xffffffff, 1], [1, 0xffffffff], []];
    for (const n of [0, 1, PAGE_ELEMENTS]) {
      for (let aliasing = 0; aliasing <= 4; aliasing++) check(aliasing, bits, n);
    }
  });

  it("rejects n beyond any buffer", () => {
    const small = makeBuffer(1, 1);
    const large = makeBuffer(2, 2);
    const n = PAGE_ELEMENTS + 1;
    expect(addU32Kernel.validate([small, large, large, n])?.reason).toBe("args");
    expect(addU32Kernel.validate([large, small, large, n])?.reason).toBe("args");
    expect(addU32Kernel.validate([large, large, small, n])?.reason).toBe("args");
    expect(addU32Kernel.validate([large, large, large, n])).toBeNull();
    expect(addU32Kernel.work([large, large, large, 9])).toBe(18);
  });
});
