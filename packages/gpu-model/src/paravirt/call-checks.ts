// Pure checks of a guest call's arguments against the backend's limits (backend.ts): an MMIO
// store batch, a DMA length and a kernel's scalar arguments. Each says what is wrong, or null;
// none changes anything, so the backend checks before it touches any state.
import { ErrorCode, type StoreBatch } from "@vgpu-ha/common/core";
import { type Failure, fail, inRange } from "../device/failure.js";

/** Every store of a batch, against a buffer of `size` bytes, before any is applied. */
export function checkStores(
  batch: StoreBatch,
  size: number,
  maxStoresPerBatch: number,
): Failure | null {
  const { offsets, widths, data } = batch;
  const count = offsets.length;
  if (widths.length !== count) {
    return fail(ErrorCode.MALFORMED, `${count} offsets but ${widths.length} widths`);
  }
  if (count > maxStoresPerBatch) {
    return fail(
      ErrorCode.LIMIT_EXCEEDED,
      `${count} stores in one batch, limit ${maxStoresPerBatch}`,
    );
  }
  let bytes = 0;
  for (let i = 0; i < count; i++) {
    const offset = offsets[i]!;
    const width = widths[i]!;
    if (width !== 1 && width !== 2 && width !== 4 && width !== 8) {
      return fail(ErrorCode.BAD_STORE, `store ${i}: width ${width} is not 1, 2, 4 or 8`);
    }
    if (offset % width !== 0) {
      return fail(ErrorCode.BAD_STORE, `store ${i}: offset ${offset} not aligned to ${width}`);
    }
    if (!inRange(offset, width, size)) {
      return fail(
        ErrorCode.OUT_OF_BOUNDS,
        `store ${i}: offset ${offset} width ${width} outside ${size} bytes`,
      );
    }
    bytes += width;
  }
  if (bytes !== data.byteLength) {
    return fail(ErrorCode.MALFORMED, `stores need ${bytes} data bytes, got ${data.byteLength}`);
  }
  return null;
}

/** A DMA read or write of `length` bytes, against the limit of one call. */
export function checkDmaSize(length: number, maxDmaBytes: number): Failure | null {
  if (length > maxDmaBytes) {
    return fail(ErrorCode.LIMIT_EXCEEDED, `DMA of ${length} bytes above the limit ${maxDmaBytes}`);
  }
  return null;
}

/** What is wrong with a kernel's scalar argument, or null. */
export function checkScalar(kind: "u32" | "i32" | "f32", value: number): string | null {
  switch (kind) {
    case "u32":
      return Number.isInteger(value) && value >= 0 && value <= 0xffffffff
        ? null
        : `u32 ${value} out of range`;
    case "i32":
      return Number.isInteger(value) && value >= -0x80000000 && value <= 0x7fffffff
        ? null
        : `i32 ${value} out of range`;
    case "f32":
      return Object.is(Math.fround(value), value) ? null : `f32 ${value} not a float32 value`;
  }
}
