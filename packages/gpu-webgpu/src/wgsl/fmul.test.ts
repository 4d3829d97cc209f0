// Proves the WGSL fmul's repair (prelude.ts) on the CPU: on a multiplier that flushes every
// product whose exact value is below 2^-126 (tininess before rounding, as the H100 does), the
// integer decision gives contract v2's product (round to f32, then flush a subnormal: the model's
// ftz(fround(a*b))) for all pairs of operands near the boundary and random ones, signs included.
import fc from "fast-check";
import { describe, expect, it } from "vitest";

const f = Math.fround;
const MIN_NORMAL = 2 ** -126;
const bits = (x: number) => new Uint32Array(new Float32Array([x]).buffer)[0]!;
const fromBits = (b: number) => new Float32Array(new Uint32Array([b >>> 0]).buffer)[0]!;
const ftz = (x: number) => (Math.abs(x) < MIN_NORMAL ? x * 0 : x);

/** The model's product (contract v2): rounded, then flushed. */
const model = (a: number, b: number) => ftz(f(a * b));

/** A multiplier that flushes when the exact product is below 2^-126 (before rounding). */
const hardware = (a: number, b: number) => (Math.abs(a * b) < MIN_NORMAL ? a * b * 0 : f(a * b));

/** The WGSL roundsToMinNormal and fmul, line for line, on that multiplier. */
function roundsToMinNormal(ua: number, ub: number): boolean {
  const k = ((ua >>> 23) & 0xff) + ((ub >>> 23) & 0xff) - 150;
  if (k <= -25) return false;
  if (k >= -22) return true;
  const ma = (ua & 0x7fffff) | 0x800000;
  const mb = (ub & 0x7fffff) | 0x800000;
  const [mh, ml, nh, nl] = [ma >>> 12, ma & 0xfff, mb >>> 12, mb & 0xfff];
  const mid = mh * nl + ml * nh;
  const t = ml * nl + ((mid & 0xfff) << 12);
  const hi = mh * nh + (mid >>> 12) + (t >>> 24);
  if (k === -24) return hi >= 0xffffff;
  return hi * 2 + ((t & 0xffffff) >>> 23) >= 0xffffff;
}

function fmul(a: number, b: number): number {
  const q = ftz(hardware(a, b));
  const zero = (bits(q) & 0x7fffffff) === 0;
  if (!zero || (bits(a) & 0x7fffffff) === 0 || (bits(b) & 0x7fffffff) === 0) return q;
  const sign = (bits(a) ^ bits(b)) & 0x80000000;
  return fromBits(roundsToMinNormal(bits(a), bits(b)) ? sign | 0x00800000 : sign);
}

function same(a: number, b: number): void {
  expect(bits(fmul(a, b)), `${a} * ${b}`).toBe(bits(model(a, b)));
}

describe("fmul", () => {
  it("keeps the products that round up to 2^-126, flushes the others", () => {
    const near = [0x1fffffff, 0x20000000, 0x1fffffff, 0x1ffffffe, 0x1f800000, 0x20000001];
    for (const x of near) {
      for (const y of near) {
        for (const sign of [0, 0x80000000]) same(fromBits(x | sign), fromBits(y));
      }
    }
    expect(bits(model(fromBits(0x20000000), fromBits(0x1fffffff)))).toBe(0x00800000);
    expect(bits(hardware(fromBits(0x20000000), fromBits(0x1fffffff)))).toBe(0);
  });

  it("agrees with the model on normal operands of any exponent", () => {
    const normal = fc
      .tuple(fc.integer({ min: 1, max: 254 }), fc.integer({ min: 0, max: 0x7fffff }), fc.boolean())
      .map(([e, m, s]) => fromBits(((s ? 0x80000000 : 0) | (e << 23) | m) >>> 0));
    const tiny = fc
      .tuple(fc.integer({ min: 1, max: 80 }), fc.integer({ min: 0, max: 0x7fffff }), fc.boolean())
      .map(([e, m, s]) => fromBits(((s ? 0x80000000 : 0) | (e << 23) | m) >>> 0));
    const around = fc
      .tuple(fc.integer({ min: 60, max: 66 }), fc.integer({ min: 0, max: 0x7fffff }), fc.boolean())
      .map(([e, m, s]) => fromBits(((s ? 0x80000000 : 0) | (e << 23) | m) >>> 0));
    const special = fc.constantFrom(0, -0, Infinity, -Infinity, Number.NaN);
    const any = fc.oneof(normal, tiny, around, special);
    fc.assert(fc.property(any, any, same), {
      numRuns: 20_000,
    });
  });
});
