// A buffer's bytes on the device: whole 4 KiB pages in one zero-filled ArrayBuffer (untouched
// pages cost no host memory) and typed views over them, made once per buffer. The device thread
// gets its buffers' memory as SharedArrayBuffers from the main thread (worker-executor.ts), so
// that thread can run a small operation itself while the device is idle.
import type { KernelBuffer } from "./kernels/types.js";

export class VramBuffer implements KernelBuffer {
  readonly id: number;
  readonly byteLength: number;
  readonly bytes: Uint8Array;
  readonly u32: Uint32Array;
  readonly i32: Int32Array;
  readonly f32: Float32Array;

  constructor(
    id: number,
    byteLength: number,
    memory: ArrayBufferLike = new ArrayBuffer(byteLength),
  ) {
    this.id = id;
    this.byteLength = byteLength;
    this.bytes = new Uint8Array(memory);
    this.u32 = new Uint32Array(memory);
    this.i32 = new Int32Array(memory);
    this.f32 = new Float32Array(memory);
  }
}
