// Proves reduce_sum_f32 writes contract v2's tree sum into out[0] (2048-element blocks, 256
// lanes of 8 strided loads each, a halving tree over the lanes, passes until one value is left;
// every addition rounded and flushed), bit for bit (NaN canonical), touching nothing else:
// against a reference written straight from the contract's wording, on random float32 bit
// patterns and on every size where the tree changes shape (n = 0, 1, 255, 256, 2047, 2048,
// 2049, 2·2048²); that the order is the tree's, not the index order; and that validate rejects
// overruns and out == in.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { reduceSumF32Kernel } from "./reduce-sum-f32.js";
import {
  addRef,
  bitsDiff,
  bitsToF32,
  f32BitsArb,
  f32ToBits,
  guardsIntact,
  makeBuffer,
  PAGE_ELEMENTS,
  pagesFor,
  snapshot,
} from "./test-support.js";

/** reduceBlock(x, base, count) as the contract words it. */
function referenceBlock(x: ArrayLike<number>, base: number, count: number): number {
  const s: number[] = [];
  for (let t = 0; t < 256; t++) {
    let acc = 0;
    for (let r = 0; r < 8; r++) {
      const i = base + t + 256 * r;
      if (i < base + count) acc = addRef(acc, x[i]!);
    }
    s.push(acc);
  }
  for (let stride = 128; stride >= 1; stride /= 2) {
    for (let t = 0; t < stride; t++) s[t] = addRef(s[t]!, s[t + stride]!);
  }
  return s[0]!;
}

/** The contract's passes, from the values of in[0..n). */
function referenceTree(values: ArrayLike<number>): number {
  if (values.length === 0) return 0;
  let v = values;
  do {
    const next: number[] = [];
    for (let w = 0; w * 2048 < v.length; w++) {
      next.push(referenceBlock(v, w * 2048, Math.min(2048, v.length - w * 2048)));
    }
    v = next;
  } while (v.length > 1);
  return v[0]!;
}

function reference(input: Float32Array, n: number): number {
  return f32ToBits(referenceTree(input.subarray(0, n)));
}

function check(outContents: number[], input: ReturnType<typeof makeBuffer>, n: number) {
  const out = makeBuffer(1, 1, outContents);
  const outBefore = snapshot(out);
  const inBefore = snapshot(input);
  const args = [out, input, n];
  expect(reduceSumF32Kernel.validate(args)).toBeNull();
  reduceSumF32Kernel.run(args);
  outBefore[0] = reference(input.f32, n);
  expect(bitsDiff(out.u32, outBefore)).toBeNull();
  expect(bitsDiff(input.u32, inBefore)).toBeNull();
  expect(guardsIntact(out) && guardsIntact(input)).toBe(true);
}

/** A buffer holding `n` elements from a xorshift stream: ordinary values with specials and
 * subnormals sprinkled in, so every rule is exercised at every size. */
function streamBuffer(n: number, seed: number) {
  const buffer = makeBuffer(2, pagesFor(n));
  const specials = [0x80000000, 0x00000001, 0x807fffff, 0x00800000, 0x80c00000, 0x33800000];
  let x = seed;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    const r = x >>> 0;
    if (r % 97 === 0) buffer.u32[i] = specials[(r >>> 8) % specials.length]!;
    else buffer.f32[i] = ((r >>> 8) / 2 ** 24 - 0.5) * 2 ** ((r & 15) - 8);
  }
  return buffer;
}

describe("reduce_sum_f32 (contract v2: fixed tree)", () => {
  it("matches the reference bit for bit on random inputs", () => {
    fc.assert(
      fc.property(
        fc.array(f32BitsArb, { maxLength: 4 }),
        fc.array(f32BitsArb, { maxLength: PAGE_ELEMENTS }),
        fc.nat({ max: 2 * PAGE_ELEMENTS + 300 }),
        (outContents, inContents, n) => check(outContents, makeBuffer(2, 3, inContents), n),
      ),
      { numRuns: 60 },
    );
  });

  it("matches the reference at every size where the tree changes shape", () => {
    for (const n of [0, 1, 255, 256, 257, 2047, 2048, 2049, 4096, 2048 * 2048 + 1]) {
      check([0xdeadbeef, 9], streamBuffer(n, n + 1), n);
    }
  });

  it("matches the reference on 2·2048² elements (three passes)", () => {
    const n = 2 * 2048 * 2048;
    check([], streamBuffer(n, 12345), n);
  });

  it("writes +0 for n = 0, and sums signed zeros and subnormals as flushed zeros", () => {
    const run = (bits: number[], n = bits.length) => {
      const out = makeBuffer(1, 1, [0xdeadbeef]);
      reduceSumF32Kernel.run([out, makeBuffer(2, 1, bits), n]);
      return out.u32[0]!;
    };
    expect(run([0x3f800000], 0)).toBe(0x00000000);
    // Each lane starts from +0, and +0 + -0 = +0: a sum of negative zeros is +0.
    expect(run([0x80000000, 0x80000000])).toBe(0x00000000);
    // Subnormal operands are zeros: 1 + subnormals = 1; subnormals alone sum to +0.
    expect(run([0x3f800000, 0x00000001, 0x807fffff])).toBe(0x3f800000);
    expect(run([0x807fffff, 0x807fffff])).toBe(0x00000000);
    // 2^-126 and -1.5·2^-126 in lanes 0 and 1 meet in the tree: -0.5·2^-126 flushes to -0.
    expect(run([0x00800000, 0x80c00000])).toBe(0x80000000);
    // NaN is canonical, whatever the payload; inf - inf is NaN.
    expect(run([0x7fc00123, 0x3f800000])).toBe(0x7fc00000);
    expect(run([0x7f800000, 0xff800000])).toBe(0x7fc00000);
  });

  it("sums in the tree's order, not in index order", () => {
    // Lane 0 holds 1 and lanes 1..255 hold 2^-24 each. In index order every 2^-24 vanishes
    // beside 1; the tree adds the small terms together first, so they count.
    const bits = [0x3f800000, ...new Array(255).fill(0x33800000)];
    const out = makeBuffer(1, 1);
    reduceSumF32Kernel.run([out, makeBuffer(2, 1, bits), 256]);
    let sequential = 0;
    for (const b of bits) sequential = Math.fround(sequential + bitsToF32(b));
    expect(sequential).toBe(1);
    expect(out.f32[0]).toBeGreaterThan(1);
  });

  it("rejects n beyond the input and out == in, and weighs five work units per element", () => {
    const out = makeBuffer(1, 1);
    const input = makeBuffer(2, 1);
    expect(reduceSumF32Kernel.validate([out, input, PAGE_ELEMENTS + 1])?.reason).toBe("args");
    expect(reduceSumF32Kernel.validate([input, input, 1])?.reason).toBe("args");
    expect(reduceSumF32Kernel.validate([out, input, PAGE_ELEMENTS])).toBeNull();
    expect(reduceSumF32Kernel.work([out, input, 8])).toBe(40);
  });
});
