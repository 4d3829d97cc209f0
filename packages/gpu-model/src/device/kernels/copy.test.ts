// Proves copy reproduces src's bits (NaN payloads included) into dst[0, n) and nothing else,
// against a naive loop on random contents and sizes; that dst == src is a no-op; and that
// validate rejects overruns of either buffer.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { copyKernel } from "./copy.js";
import {
  bitsDiff,
  guardsIntact,
  makeBuffer,
  PAGE_ELEMENTS,
  snapshot,
  u32Arb,
} from "./test-support.js";

function reference(dstBefore: Uint32Array, srcBefore: Uint32Array, n: number): Uint32Array {
  const after = dstBefore.slice();
  for (let i = 0; i < n; i++) after[i] = srcBefore[i]!;
  return after;
}

function check(
  dstPages: number,
  srcPages: number,
  dstBits: number[],
  srcBits: number[],
  n: number,
) {
  const dst = makeBuffer(1, dstPages, dstBits);
  const src = makeBuffer(2, srcPages, srcBits);
  const dstBefore = snapshot(dst);
  const srcBefore = snapshot(src);
  const args = [dst, src, n];
  expect(copyKernel.validate(args)).toBeNull();
  copyKernel.run(args);
  expect(bitsDiff(dst.u32, reference(dstBefore, srcBefore, n))).toBeNull();
  expect(bitsDiff(src.u32, srcBefore)).toBeNull();
  expect(guardsIntact(dst) && guardsIntact(src)).toBe(true);
}

describe("copy", () => {
  it("matches the reference on random inputs", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2 }),
        fc.integer({ min: 1, max: 2 }),
        fc.array(u32Arb, { maxLength: 48 }),
        fc.array(u32Arb, { maxLength: 48 }),
        fc.nat(),
        (dstPages, srcPages, dstBits, srcBits, rawN) => {
          const capacity = Math.min(dstPages, srcPages) * PAGE_ELEMENTS;
          check(dstPages, srcPages, dstBits, srcBits, rawN % (capacity + 1));
        },
      ),
    );
  });

  it("handles n = 0, 1 and the whole buffer", () => {
    for (const n of [0, 1, PAGE_ELEMENTS]) check(1, 1, [1, 2, 3], [0x7fa00001, 0xffffffff], n);
    check(2, 4, [], [5, 6], 2 * PAGE_ELEMENTS);
  });

  it("leaves a buffer copied onto itself unchanged", () => {
    const buffer = makeBuffer(3, 1, [0x7f800001, 0x80000000, 42]);
    const before = snapshot(buffer);
    const args = [buffer, buffer, PAGE_ELEMENTS];
    expect(copyKernel.validate(args)).toBeNull();
    copyKernel.run(args);
    expect(bitsDiff(buffer.u32, before)).toBeNull();
  });

  it("rejects n beyond either buffer", () => {
    const small = makeBuffer(1, 1);
    const large = makeBuffer(2, 2);
    expect(copyKernel.validate([small, large, PAGE_ELEMENTS + 1])?.reason).toBe("args");
    expect(copyKernel.validate([large, small, PAGE_ELEMENTS + 1])?.reason).toBe("args");
    expect(copyKernel.validate([large, small, PAGE_ELEMENTS])).toBeNull();
    expect(copyKernel.work([large, small, 5])).toBe(5);
  });
});
