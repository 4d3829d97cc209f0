// Converts between the generated wire messages and the domain types at the edge. Decoding
// checks presence of every required part and reports MALFORMED otherwise; it never throws.
import { create } from "@bufbuild/protobuf";
import type { Call, CallOutput, CallResult, Frame, KernelArg, StoreBatch } from "../calls.js";
import { NO_OUTPUT } from "../calls.js";
import { ErrorCode } from "../errors.js";
import {
  FrameResultSchema,
  FrameSchema,
  type Frame as WireFrame,
  type FrameResult as WireFrameResult,
} from "../gen/vgpu/v1/guest_pb.js";
import {
  CallResultSchema,
  CallSchema,
  KernelArgSchema,
  StoreBatchSchema,
  type Call as WireCall,
  type CallResult as WireCallResult,
  type KernelArg as WireKernelArg,
  type StoreBatch as WireStoreBatch,
} from "../gen/vgpu/v1/types_pb.js";

import { MalformedError } from "./malformed.js";

export { MalformedError };

const malformed = (message: string): never => {
  throw new MalformedError(message);
};

/** A 64-bit wire integer as a safe JS number, or MALFORMED. */
export function toSafe(value: bigint, what: string): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) return malformed(`${what} ${value} too large`);
  return Number(value);
}

function decodeArg(arg: WireKernelArg, i: number): KernelArg {
  const v = arg.value;
  switch (v.case) {
    case "buffer":
      return { kind: "buffer", bo: v.value };
    case "u32":
      return { kind: "u32", value: v.value };
    case "i32":
      return { kind: "i32", value: v.value };
    case "f32":
      return { kind: "f32", value: Math.fround(v.value) };
    default:
      return malformed(`kernel argument ${i} has no value`);
  }
}

function decodeCallOrThrow(call: WireCall): Call {
  const op = call.op;
  switch (op.case) {
    case "contextCreate":
      return { op: "contextCreate" };
    case "contextDestroy":
      return { op: "contextDestroy", context: op.value.context };
    case "boAlloc":
      return {
        op: "boAlloc",
        context: op.value.context,
        sizeBytes: toSafe(op.value.sizeBytes, "size"),
      };
    case "boFree":
      return { op: "boFree", context: op.value.context, bo: op.value.bo };
    case "boMap":
      return { op: "boMap", context: op.value.context, bo: op.value.bo };
    case "boUnmap":
      return { op: "boUnmap", context: op.value.context, bo: op.value.bo };
    case "dmaWrite":
      return {
        op: "dmaWrite",
        context: op.value.context,
        bo: op.value.bo,
        offset: toSafe(op.value.offset, "offset"),
        data: op.value.data,
      };
    case "dmaRead":
      return {
        op: "dmaRead",
        context: op.value.context,
        bo: op.value.bo,
        offset: toSafe(op.value.offset, "offset"),
        length: toSafe(op.value.length, "length"),
      };
    case "boCopy": {
      const { context, srcBo, srcOffset, dstBo, dstOffset, length } = op.value;
      return {
        op: "boCopy",
        context,
        srcBo,
        srcOffset: toSafe(srcOffset, "source offset"),
        dstBo,
        dstOffset: toSafe(dstOffset, "destination offset"),
        length: toSafe(length, "length"),
      };
    }
    case "kernelLaunch":
      return {
        op: "kernelLaunch",
        context: op.value.context,
        kernel: op.value.kernel,
        args: op.value.args.map(decodeArg),
      };
    case "fence":
      return { op: "fence", context: op.value.context };
    default:
      return malformed("call has no operation");
  }
}

export function decodeStoreBatch(batch: WireStoreBatch): StoreBatch {
  return {
    context: batch.context,
    bo: batch.bo,
    offsets: batch.offsets,
    widths: batch.widths,
    data: batch.data,
  };
}

/** A wire frame as a domain frame, or a MalformedError. */
export function decodeFrame(frame: WireFrame): Frame | MalformedError {
  try {
    const number = toSafe(frame.number, "frame number");
    if (number < 1) return new MalformedError("frame numbers start at 1");
    const body = frame.body;
    if (body.case === "call") {
      return { number, body: { kind: "call", call: decodeCallOrThrow(body.value) } };
    }
    if (body.case === "stores") {
      return { number, body: { kind: "stores", batch: decodeStoreBatch(body.value) } };
    }
    return new MalformedError(`frame ${number} has no body`);
  } catch (e) {
    if (e instanceof MalformedError) return e;
    throw e;
  }
}

function encodeArg(arg: KernelArg): WireKernelArg {
  switch (arg.kind) {
    case "buffer":
      return create(KernelArgSchema, { value: { case: "buffer", value: arg.bo } });
    case "u32":
      return create(KernelArgSchema, { value: { case: "u32", value: arg.value } });
    case "i32":
      return create(KernelArgSchema, { value: { case: "i32", value: arg.value } });
    case "f32":
      return create(KernelArgSchema, { value: { case: "f32", value: arg.value } });
  }
}

export function encodeCall(call: Call): WireCall {
  switch (call.op) {
    case "contextCreate":
      return create(CallSchema, { op: { case: "contextCreate", value: {} } });
    case "kernelLaunch":
      return create(CallSchema, {
        op: {
          case: "kernelLaunch",
          value: { context: call.context, kernel: call.kernel, args: call.args.map(encodeArg) },
        },
      });
    case "contextDestroy":
    case "fence":
      return create(CallSchema, { op: { case: call.op, value: { context: call.context } } });
    case "boFree":
    case "boMap":
    case "boUnmap":
      return create(CallSchema, {
        op: { case: call.op, value: { context: call.context, bo: call.bo } },
      });
    case "boAlloc":
      return create(CallSchema, {
        op: {
          case: "boAlloc",
          value: { context: call.context, sizeBytes: BigInt(call.sizeBytes) },
        },
      });
    case "dmaWrite":
      return create(CallSchema, {
        op: {
          case: "dmaWrite",
          value: {
            context: call.context,
            bo: call.bo,
            offset: BigInt(call.offset),
            data: call.data,
          },
        },
      });
    case "dmaRead":
      return create(CallSchema, {
        op: {
          case: "dmaRead",
          value: {
            context: call.context,
            bo: call.bo,
            offset: BigInt(call.offset),
            length: BigInt(call.length),
          },
        },
      });
    case "boCopy":
      return create(CallSchema, {
        op: {
          case: "boCopy",
          value: {
            context: call.context,
            srcBo: call.srcBo,
            srcOffset: BigInt(call.srcOffset),
            dstBo: call.dstBo,
            dstOffset: BigInt(call.dstOffset),
            length: BigInt(call.length),
          },
        },
      });
  }
}

export function encodeStoreBatch(batch: StoreBatch): WireStoreBatch {
  return create(StoreBatchSchema, {
    context: batch.context,
    bo: batch.bo,
    offsets: Array.isArray(batch.offsets) ? batch.offsets : Array.from(batch.offsets),
    widths: batch.widths,
    data: batch.data,
  });
}

export function encodeFrame(frame: Frame): WireFrame {
  return create(FrameSchema, {
    number: BigInt(frame.number),
    body:
      frame.body.kind === "call"
        ? { case: "call", value: encodeCall(frame.body.call) }
        : { case: "stores", value: encodeStoreBatch(frame.body.batch) },
  });
}

export function encodeResult(result: CallResult): WireCallResult {
  const out = result.output;
  return create(CallResultSchema, {
    code: result.code,
    message: result.message,
    output:
      out.kind === "handle"
        ? { case: "handle", value: out.handle }
        : out.kind === "data"
          ? { case: "data", value: out.data }
          : out.kind === "fence"
            ? { case: "fenceValue", value: BigInt(out.value) }
            : { case: undefined },
  });
}

export function encodeFrameResult(frame: number, result: CallResult): WireFrameResult {
  return create(FrameResultSchema, { frame: BigInt(frame), result: encodeResult(result) });
}

export function decodeResult(result: WireCallResult | undefined): CallResult {
  if (result === undefined) {
    return { code: ErrorCode.MALFORMED, message: "reply without a result", output: NO_OUTPUT };
  }
  const out = result.output;
  let output: CallOutput = NO_OUTPUT;
  if (out.case === "handle") output = { kind: "handle", handle: out.value };
  else if (out.case === "data") output = { kind: "data", data: new Uint8Array(out.value) };
  else if (out.case === "fenceValue") output = { kind: "fence", value: Number(out.value) };
  return { code: result.code, message: result.message, output };
}
