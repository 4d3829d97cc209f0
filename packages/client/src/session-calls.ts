// The typed calls of a session over its raw `call`: each resolves with the call's output and
// rejects with a VgpuError for any other code than OK; and mapped buffers, written like memory.
import {
  type Call,
  type CallResult,
  ErrorCode,
  type KernelArg,
  type StoreBatch,
  VgpuError,
} from "@vgpu-ha/common";
import { MappedBuffer } from "./mapped-buffer.js";

export abstract class SessionCalls {
  protected readonly mapped = new Set<MappedBuffer>();

  /** Sends one call; resolves with its result whatever the code. */
  abstract call(call: Call): Promise<CallResult>;
  /** Sends one store batch as a frame; its result. */
  abstract storeBatch(batch: StoreBatch): Promise<CallResult>;
  /** Called by mapped buffers when they hold stores: send them soon. */
  abstract storesPending(): void;

  private async expectOk(call: Call): Promise<CallResult> {
    const result = await this.call(call);
    if (result.code !== ErrorCode.OK) throw new VgpuError(result.code, result.message);
    return result;
  }

  private async expectHandle(call: Call): Promise<number> {
    const r = await this.expectOk(call);
    if (r.output.kind !== "handle") throw new VgpuError(ErrorCode.MALFORMED, "no handle in reply");
    return r.output.handle;
  }

  createContext(): Promise<number> {
    return this.expectHandle({ op: "contextCreate" });
  }

  async destroyContext(context: number): Promise<void> {
    await this.expectOk({ op: "contextDestroy", context });
  }

  allocBo(context: number, sizeBytes: number): Promise<number> {
    return this.expectHandle({ op: "boAlloc", context, sizeBytes });
  }

  async freeBo(context: number, bo: number): Promise<void> {
    await this.expectOk({ op: "boFree", context, bo });
  }

  async dmaWrite(context: number, bo: number, offset: number, data: Uint8Array): Promise<void> {
    await this.expectOk({ op: "dmaWrite", context, bo, offset, data });
  }

  async dmaRead(context: number, bo: number, offset: number, length: number): Promise<Uint8Array> {
    const r = await this.expectOk({ op: "dmaRead", context, bo, offset, length });
    if (r.output.kind !== "data") throw new VgpuError(ErrorCode.MALFORMED, "no data in reply");
    return r.output.data;
  }

  async copy(
    context: number,
    src: { bo: number; offset: number },
    dst: { bo: number; offset: number },
    length: number,
  ): Promise<void> {
    await this.expectOk({
      op: "boCopy",
      context,
      srcBo: src.bo,
      srcOffset: src.offset,
      dstBo: dst.bo,
      dstOffset: dst.offset,
      length,
    });
  }

  async launch(context: number, kernel: string, args: readonly KernelArg[]): Promise<void> {
    await this.expectOk({ op: "kernelLaunch", context, kernel, args });
  }

  async fence(context: number): Promise<number> {
    const r = await this.expectOk({ op: "fence", context });
    if (r.output.kind !== "fence") throw new VgpuError(ErrorCode.MALFORMED, "no fence in reply");
    return r.output.value;
  }

  /** Maps a buffer and returns an object written like memory; writes become store frames. */
  async map(context: number, bo: number, sizeBytes: number): Promise<MappedBuffer> {
    await this.expectOk({ op: "boMap", context, bo });
    const mapped = new MappedBuffer(this, context, bo, sizeBytes);
    this.mapped.add(mapped);
    return mapped;
  }

  async unmap(mapped: MappedBuffer): Promise<void> {
    await mapped.flush();
    this.mapped.delete(mapped);
    await this.expectOk({ op: "boUnmap", context: mapped.context, bo: mapped.bo });
  }

  /** Turns every mapped buffer's pending stores into frames, before anything after them. */
  protected flushStores(): void {
    for (const m of this.mapped) m.emit();
  }
}

export const buf = (bo: number): KernelArg => ({ kind: "buffer", bo });
export const u32 = (value: number): KernelArg => ({ kind: "u32", value: value >>> 0 });
export const i32 = (value: number): KernelArg => ({ kind: "i32", value: value | 0 });
export const f32 = (value: number): KernelArg => ({ kind: "f32", value: Math.fround(value) });
