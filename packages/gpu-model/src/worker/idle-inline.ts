// Which operations the main thread may run itself rather than cross to the device thread
// (issue #14, the crossing cost): small copies of bytes, run only while the device thread is
// idle (every operation submitted before has completed), on the buffers' shared memory. A
// crossing costs two thread wake-ups (tens of microseconds on a shared or virtual machine) and
// a structured clone each way; a 16-byte dmaWrite costs well under a microsecond. Kernels,
// hashing and snapshot work always run on the device thread: those are what it is for.
import type { DeviceOp } from "../device/ops.js";

/** Writes, reads, copies and page writes of at most this many bytes may run inline. */
export const INLINE_MAX_BYTES = 64 * 1024;
/** MMIO store batches (a loop per byte) of at most this many stores may run inline. */
export const INLINE_MAX_STORES = 4096;

/** Whether `op` is small work on bytes that the submitting thread may run while the device is idle. */
export function runsInline(op: DeviceOp, maxBytes: number): boolean {
  switch (op.k) {
    case "write":
      return op.data.byteLength <= maxBytes;
    case "read":
    case "copy":
      return op.length <= maxBytes;
    case "pages":
      return op.writes.reduce((sum, w) => sum + w.data.byteLength, 0) <= maxBytes;
    case "stores":
      return maxBytes > 0 && op.offsets.length <= INLINE_MAX_STORES;
    case "xor":
      return maxBytes > 0;
    default:
      return false;
  }
}
