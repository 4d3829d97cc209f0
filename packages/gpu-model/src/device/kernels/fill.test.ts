// Proves fill writes exactly value into elements [0, n) and nothing else, against a naive loop
// on random contents, sizes (0, 1, full capacity) and values; and that validate rejects overruns.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fillKernel } from "./fill.js";
import {
  bitsDiff,
  guardsIntact,
  makeBuffer,
  PAGE_ELEMENTS,
  snapshot,
  u32Arb,
} from "./test-support.js";

function reference(before: Uint32Array, n: number, value: number): Uint32Array {
  const after = before.slice();
  for (let i = 0; i < n; i++) after[i] = value;
  return after;
}

function check(pages: number, contents: readonly number[], n: number, value: number) {
  const dst = makeBuffer(1, pages, contents);
  const before = snapshot(dst);
  const args = [dst, n, value];
  expect(fillKernel.validate(args)).toBeNull();
  fillKernel.run(args);
  expect(bitsDiff(dst.u32, reference(before, n, value))).toBeNull();
  expect(guardsIntact(dst)).toBe(true);
}

describe("fill", () => {
  it("matches the reference on random inputs", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2 }),
        fc.array(u32Arb, { maxLength: 64 }),
        fc.nat(),
        u32Arb,
        (pages, contents, rawN, value) => {
          check(pages, contents, rawN % (pages * PAGE_ELEMENTS + 1), value);
        },
      ),
    );
  });

  it("handles n = 0, 1 and the whole buffer", () => {
    for (const n of [0, 1, PAGE_ELEMENTS - 1, PAGE_ELEMENTS]) check(1, [7, 8, 9], n, 0xdeadbeef);
    check(3, [], 3 * PAGE_ELEMENTS, 0xffffffff);
  });

  it("rejects n beyond the buffer", () => {
    const dst = makeBuffer(1, 1);
    expect(fillKernel.validate([dst, PAGE_ELEMENTS + 1, 0])?.reason).toBe("args");
    expect(fillKernel.validate([dst, 0xffffffff, 0])?.reason).toBe("args");
    expect(fillKernel.work([dst, 77, 0])).toBe(77);
  });
});
