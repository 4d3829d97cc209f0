// Typed access to resolved launch arguments and the size, aliasing and rejection helpers every
// kernel's validate() is built from. Size checks divide instead of multiplying, so no product of
// two u32 scalars ever has to be exact in a double.
import type { KernelBuffer, KernelRejection, ResolvedArg } from "./types.js";

/** The buffer in slot `index`. The device checks slot kinds first, so a mismatch is a bug. */
export function bufferArg(args: readonly ResolvedArg[], index: number): KernelBuffer {
  const arg = args[index];
  if (arg === undefined || typeof arg === "number") {
    throw new Error(`invariant: kernel argument ${index} must be a buffer`);
  }
  return arg;
}

/** The scalar in slot `index` (already a valid u32, i32 or fround-ed f32). */
export function scalarArg(args: readonly ResolvedArg[], index: number): number {
  const arg = args[index];
  if (typeof arg !== "number") {
    throw new Error(`invariant: kernel argument ${index} must be a scalar`);
  }
  return arg;
}

export function rejectArgs(message: string): KernelRejection {
  return { reason: "args", message };
}

/** True when x*y 4-byte elements fit in `capacityElements`, for non-negative integers x, y. */
export function productFits(x: number, y: number, capacityElements: number): boolean {
  if (x === 0 || y === 0) return true;
  return y <= Math.floor(capacityElements / x);
}

/** Rejects when `count` elements (x*y when y is given) do not fit in buffer `name`. */
export function checkFits(
  name: string,
  buffer: KernelBuffer,
  x: number,
  y = 1,
): KernelRejection | null {
  // From the size, not a view: validation runs where the buffer's bytes are not (the main thread).
  const capacityElements = Math.floor(buffer.byteLength / 4);
  if (productFits(x, y, capacityElements)) return null;
  const count = y === 1 ? `${x}` : `${x}*${y}`;
  return rejectArgs(
    `${name} holds ${capacityElements} elements (${buffer.byteLength} bytes), needs ${count}`,
  );
}

/** Rejects when two buffer slots name the same buffer object and the kernel forbids that. */
export function checkDistinct(
  nameA: string,
  a: KernelBuffer,
  nameB: string,
  b: KernelBuffer,
): KernelRejection | null {
  if (a.id !== b.id) return null;
  return rejectArgs(`${nameA} and ${nameB} must be different buffers`);
}

/** Rejects a scalar that must be at least 1. */
export function checkPositive(name: string, value: number): KernelRejection | null {
  if (value >= 1) return null;
  return rejectArgs(`${name} must be at least 1, got ${value}`);
}
