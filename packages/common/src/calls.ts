// Domain types of the paravirtual calls. The wire types in gen/ convert to these at the edge
// (wire/guest-codec.ts); the GPU model and the protocol cores only see these.
import type { ErrorCode } from "./gen/vgpu/v1/types_pb.js";

export type KernelArg =
  | { readonly kind: "buffer"; readonly bo: number }
  | { readonly kind: "u32"; readonly value: number }
  | { readonly kind: "i32"; readonly value: number }
  | { readonly kind: "f32"; readonly value: number };

export type Call =
  | { readonly op: "contextCreate" }
  | { readonly op: "contextDestroy"; readonly context: number }
  | { readonly op: "boAlloc"; readonly context: number; readonly sizeBytes: number }
  | { readonly op: "boFree"; readonly context: number; readonly bo: number }
  | { readonly op: "boMap"; readonly context: number; readonly bo: number }
  | { readonly op: "boUnmap"; readonly context: number; readonly bo: number }
  | {
      readonly op: "dmaWrite";
      readonly context: number;
      readonly bo: number;
      readonly offset: number;
      readonly data: Uint8Array;
    }
  | {
      readonly op: "dmaRead";
      readonly context: number;
      readonly bo: number;
      readonly offset: number;
      readonly length: number;
    }
  | {
      readonly op: "boCopy";
      readonly context: number;
      readonly srcBo: number;
      readonly srcOffset: number;
      readonly dstBo: number;
      readonly dstOffset: number;
      readonly length: number;
    }
  | {
      readonly op: "kernelLaunch";
      readonly context: number;
      readonly kernel: string;
      readonly args: readonly KernelArg[];
    }
  | { readonly op: "fence"; readonly context: number };

export type CallOp = Call["op"];

export const CALL_OPS = [
  "contextCreate",
  "contextDestroy",
  "boAlloc",
  "boFree",
  "boMap",
  "boUnmap",
  "dmaWrite",
  "dmaRead",
  "boCopy",
  "kernelLaunch",
  "fence",
] as const satisfies readonly CallOp[];

/**
 * MMIO stores into one mapped buffer, in order: store i writes widths[i] bytes at offsets[i],
 * taken little-endian from the next widths[i] bytes of data.
 */
export interface StoreBatch {
  readonly context: number;
  readonly bo: number;
  readonly offsets: ArrayLike<number>;
  readonly widths: Uint8Array;
  readonly data: Uint8Array;
}

export type CallOutput =
  | { readonly kind: "none" }
  | { readonly kind: "handle"; readonly handle: number }
  | { readonly kind: "data"; readonly data: Uint8Array }
  | { readonly kind: "fence"; readonly value: number };

export interface CallResult {
  readonly code: ErrorCode;
  readonly message: string;
  readonly output: CallOutput;
}

export type FrameBody =
  | { readonly kind: "call"; readonly call: Call }
  | { readonly kind: "stores"; readonly batch: StoreBatch };

export interface Frame {
  readonly number: number;
  readonly body: FrameBody;
}

export const NO_OUTPUT: CallOutput = Object.freeze({ kind: "none" });
