// Proves the wire codec is lossless for every call kind and store batches (domain → proto →
// bytes → proto → domain), and that malformed frames decode to MalformedError, never a throw.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import type { Call, Frame } from "../calls.js";
import { ErrorCode } from "../errors.js";
import { FrameSchema } from "../gen/vgpu/v1/guest_pb.js";
import {
  decodeFrame,
  decodeResult,
  encodeFrame,
  encodeResult,
  MalformedError,
} from "./call-codec.js";

const calls: Call[] = [
  { op: "contextCreate" },
  { op: "contextDestroy", context: 3 },
  { op: "boAlloc", context: 1, sizeBytes: 2 ** 40 },
  { op: "boFree", context: 1, bo: 2 },
  { op: "boMap", context: 1, bo: 2 },
  { op: "boUnmap", context: 1, bo: 2 },
  { op: "dmaWrite", context: 1, bo: 2, offset: 4096, data: new Uint8Array([1, 2, 3]) },
  { op: "dmaRead", context: 1, bo: 2, offset: 8, length: 16 },
  { op: "boCopy", context: 1, srcBo: 2, srcOffset: 4, dstBo: 3, dstOffset: 8, length: 12 },
  {
    op: "kernelLaunch",
    context: 1,
    kernel: "saxpy_f32",
    args: [
      { kind: "buffer", bo: 2 },
      { kind: "u32", value: 4294967295 },
      { kind: "i32", value: -7 },
      { kind: "f32", value: Math.fround(0.1) },
    ],
  },
  { op: "fence", context: 9 },
];

const roundTrip = (frame: Frame) =>
  decodeFrame(fromBinary(FrameSchema, toBinary(FrameSchema, encodeFrame(frame))));

describe("call codec", () => {
  it.each(calls)("round-trips $op", (call) => {
    expect(roundTrip({ number: 7, body: { kind: "call", call } })).toEqual({
      number: 7,
      body: { kind: "call", call },
    });
  });

  it("round-trips a store batch", () => {
    const batch = {
      context: 1,
      bo: 2,
      offsets: [0, 8, 4094],
      widths: new Uint8Array([4, 8, 2]),
      data: new Uint8Array(14).fill(5),
    };
    const got = roundTrip({ number: 1, body: { kind: "stores", batch } });
    expect(got).toEqual({ number: 1, body: { kind: "stores", batch } });
  });

  it("reports frames without a body, without an op, or with a huge number as malformed", () => {
    expect(decodeFrame(create(FrameSchema, { number: 1n }))).toBeInstanceOf(MalformedError);
    expect(
      decodeFrame(create(FrameSchema, { number: 1n, body: { case: "call", value: {} } })),
    ).toBeInstanceOf(MalformedError);
    expect(decodeFrame(create(FrameSchema, { number: 2n ** 60n }))).toBeInstanceOf(MalformedError);
    expect(decodeFrame(create(FrameSchema, { number: 0n }))).toBeInstanceOf(MalformedError);
  });

  it("round-trips results of every output kind", () => {
    for (const output of [
      { kind: "none" as const },
      { kind: "handle" as const, handle: 5 },
      { kind: "fence" as const, value: 12 },
      { kind: "data" as const, data: new Uint8Array([9, 8]) },
    ]) {
      const result = { code: ErrorCode.OK, message: "", output };
      expect(decodeResult(encodeResult(result))).toEqual(result);
    }
  });
});
