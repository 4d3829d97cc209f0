// Proves contract v2's flush-to-zero helper on purpose-built inputs (subnormals of each sign,
// the smallest normals, ±0, ±inf, NaN) and, by property, that it equals a reference written from
// the bit layout (exponent field 0 → the zero of the sign bit) on any float32.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { F32_MIN_NORMAL, ftz } from "./f32.js";
import { bitsToF32, f32ToBits, flushRef, u32Arb } from "./test-support.js";

const flushedBits = (bits: number) => f32ToBits(ftz(bitsToF32(bits)));

describe("ftz (contract v2 flush-to-zero)", () => {
  it("turns subnormals into zeros of their sign and keeps everything else", () => {
    expect(flushedBits(0x00000001)).toBe(0x00000000);
    expect(flushedBits(0x007fffff)).toBe(0x00000000);
    expect(flushedBits(0x80000001)).toBe(0x80000000);
    expect(flushedBits(0x807fffff)).toBe(0x80000000);
    for (const kept of [
      0x00000000, 0x80000000, 0x00800000, 0x80800000, 0x3f800000, 0x7f800000, 0xff800000,
    ]) {
      expect(flushedBits(kept)).toBe(kept);
    }
    expect(Number.isNaN(ftz(Number.NaN))).toBe(true);
    expect(F32_MIN_NORMAL).toBe(bitsToF32(0x00800000));
  });

  it("equals the bit-layout reference on any float32", () => {
    fc.assert(
      fc.property(u32Arb, fc.integer({ min: 0, max: 0x7fffff }), fc.boolean(), (bits, m, neg) => {
        const subnormal = ((neg ? 0x80000000 : 0) | m) >>> 0;
        for (const b of [bits, subnormal]) {
          const value = bitsToF32(b);
          expect(f32ToBits(ftz(value))).toBe(f32ToBits(flushRef(value)));
        }
      }),
    );
  });
});
