// Helpers for the kernel tests: guarded test buffers, float32 bit patterns, canonical-NaN
// reference results and fast-check arbitraries for float32 data. Not used by the kernels.
import fc from "fast-check";
import { CANONICAL_NAN_BITS } from "./f32.js";
import type { KernelBuffer } from "./types.js";

export const PAGE_BYTES = 4096;
export const PAGE_ELEMENTS = PAGE_BYTES / 4;
const GUARD_BYTE = 0xa5;

/** A test buffer: `pages` pages of a larger memory with one guard page on each side. */
export interface TestBuffer extends KernelBuffer {
  readonly memory: Uint8Array;
}

export function makeBuffer(id: number, pages: number, fillBits?: readonly number[]): TestBuffer {
  const memory = new Uint8Array((pages + 2) * PAGE_BYTES);
  memory.fill(GUARD_BYTE);
  const byteLength = pages * PAGE_BYTES;
  const buffer = memory.buffer;
  const u32 = new Uint32Array(buffer, PAGE_BYTES, byteLength / 4);
  u32.fill(0);
  if (fillBits !== undefined) u32.set(fillBits);
  return {
    id,
    byteLength,
    memory,
    bytes: new Uint8Array(buffer, PAGE_BYTES, byteLength),
    u32,
    i32: new Int32Array(buffer, PAGE_BYTES, byteLength / 4),
    f32: new Float32Array(buffer, PAGE_BYTES, byteLength / 4),
  };
}

/** True when neither guard page around the buffer was written. */
export function guardsIntact(buffer: TestBuffer): boolean {
  const { memory } = buffer;
  const end = memory.length - PAGE_BYTES;
  for (let i = 0; i < PAGE_BYTES; i++) {
    if (memory[i] !== GUARD_BYTE || memory[end + i] !== GUARD_BYTE) return false;
  }
  return true;
}

/** Null when both arrays hold the same bits, else where and how they first differ. Much faster
 * than a deep-equality matcher on thousands of elements. */
export function bitsDiff(actual: Uint32Array, expected: Uint32Array): string | null {
  if (actual.length !== expected.length) {
    return `length ${actual.length}, expected ${expected.length}`;
  }
  for (let i = 0; i < actual.length; i++) {
    if (actual[i] !== expected[i]) {
      const hex = (bits: number) => `0x${bits.toString(16).padStart(8, "0")}`;
      return `element ${i}: ${hex(actual[i]!)}, expected ${hex(expected[i]!)}`;
    }
  }
  return null;
}

/** True when two byte arrays hold the same bytes (faster than a deep equality matcher). */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Pages needed to hold `elements` 4-byte elements (at least one). */
export function pagesFor(elements: number): number {
  return Math.max(1, Math.ceil(elements / PAGE_ELEMENTS));
}

/** A copy of a buffer's whole contents as bits. */
export function snapshot(buffer: KernelBuffer): Uint32Array {
  return buffer.u32.slice();
}

/** The float32 value with these bits (NaN payloads may not survive the trip to a double). */
export function bitsToF32(bits: number): number {
  return new Float32Array(new Uint32Array([bits]).buffer)[0]!;
}

/** The bits a kernel must write for float32 result `value`: NaN is canonical. */
export function f32ToBits(value: number): number {
  if (Number.isNaN(value)) return CANONICAL_NAN_BITS;
  return new Uint32Array(new Float32Array([value]).buffer)[0]!;
}

const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

/** The bits of float32 value `value` (NaN payloads may not survive the trip from a double). */
function bitsOf(value: number): number {
  scratchF32[0] = value;
  return scratchU32[0]!;
}

/**
 * Contract v2's flush-to-zero, written from the bits, independently of the kernels' ftz(): a
 * value whose exponent field is 0 (a subnormal, or a zero) becomes the zero of its sign bit.
 */
export function flushRef(value: number): number {
  const bits = bitsOf(value);
  if ((bits & 0x7f800000) !== 0) return value;
  return bits >>> 31 === 1 ? -0 : 0;
}

/** Contract v2's f32 a + b: operands flushed, the sum rounded to float32, then flushed. */
export function addRef(a: number, b: number): number {
  return flushRef(Math.fround(flushRef(a) + flushRef(b)));
}

/** Contract v2's f32 a - b. */
export function subRef(a: number, b: number): number {
  return flushRef(Math.fround(flushRef(a) - flushRef(b)));
}

/** Contract v2's f32 a * b. */
export function mulRef(a: number, b: number): number {
  return flushRef(Math.fround(flushRef(a) * flushRef(b)));
}

/**
 * Bits of tiny float32 values of either sign, where flush-to-zero (contract v2) acts: subnormals
 * (exponent field 0), normals down to 2^-126 whose sums can cancel into the subnormal range, and
 * values near 2^-63 whose products are just below or above 2^-126.
 */
export function tinyBitsArb(): fc.Arbitrary<number> {
  const exponent = fc.oneof(
    fc.constant(0),
    fc.integer({ min: 1, max: 4 }),
    fc.integer({ min: 60, max: 66 }),
  );
  return fc
    .tuple(fc.boolean(), exponent, fc.integer({ min: 0, max: 0x7fffff }))
    .map(([negative, e, mantissa]) => ((negative ? 0x80000000 : 0) | (e << 23) | mantissa) >>> 0);
}

/** float32 bit patterns: mostly modest values (so rounding matters), every special value, raw
 * bits (NaN payloads, signalling NaNs), and tiny values and subnormals (flush-to-zero). */
export const f32BitsArb: fc.Arbitrary<number> = fc.oneof(
  { weight: 6, arbitrary: fc.float({ min: -8, max: 8, noNaN: true }).map(f32ToBits) },
  { weight: 2, arbitrary: fc.float().map(f32ToBits) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffffffff }) },
  { weight: 2, arbitrary: tinyBitsArb() },
);

/** A float32 scalar as the device passes it: any fround-ed double, NaN included. */
export const f32ScalarArb: fc.Arbitrary<number> = fc.oneof(
  { weight: 6, arbitrary: fc.float({ min: -2, max: 2, noNaN: true }) },
  { weight: 1, arbitrary: fc.float() },
);

export const u32Arb: fc.Arbitrary<number> = fc.oneof(
  fc.integer({ min: 0, max: 0xffffffff }),
  fc.constantFrom(0, 1, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff),
);
