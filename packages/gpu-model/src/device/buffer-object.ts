// A buffer object as the paravirtual layer sees it (main thread): its device handle, its size
// in whole 4 KiB pages (like a real driver's allocation granularity, so the size a guest sees
// is the page-rounded size) and whether it is mapped. Its bytes live on the device
// (vram-buffer.ts); `bytes` and the typed views reach them only where the device runs inline
// (tests, tools) and throw otherwise.
import type { KernelBuffer } from "./kernels/types.js";
import type { VramBuffer } from "./vram-buffer.js";

/** The device's bytes of a buffer, where they can be reached synchronously. */
export type PeekBytes = (id: number) => VramBuffer;

export class BufferObject implements KernelBuffer {
  readonly id: number;
  readonly byteLength: number;
  mapped = false;
  private readonly peek: PeekBytes;

  constructor(id: number, byteLength: number, peek: PeekBytes) {
    this.id = id;
    this.byteLength = byteLength;
    this.peek = peek;
  }

  /** The live bytes (inline device only). */
  get bytes(): Uint8Array {
    return this.peek(this.id).bytes;
  }
  get u32(): Uint32Array {
    return this.peek(this.id).u32;
  }
  get i32(): Int32Array {
    return this.peek(this.id).i32;
  }
  get f32(): Float32Array {
    return this.peek(this.id).f32;
  }
}
