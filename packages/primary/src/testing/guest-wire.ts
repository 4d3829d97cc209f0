// Guest messages as a guest sends them, for tests of the pure guest sessions machine (the core
// may not import the wire codec: it is the edge's) and the codec's decoder the driver injects.
import { create } from "@bufbuild/protobuf";
import { type Call, decodeFrame, encodeFrame, type StoreBatch, wire } from "@vgpu-ha/common";

export { decodeFrame };

export const openMsg = (tenant = "a", resumeSessionId = "", token = "good"): wire.GuestMessage =>
  create(wire.GuestMessageSchema, {
    kind: { case: "open", value: { tenant, token, resumeSessionId } },
  });

export const closeMsg = (): wire.GuestMessage =>
  create(wire.GuestMessageSchema, { kind: { case: "close", value: {} } });

/** A Frames message of `bodies`, numbered from `first`. */
export const framesMsg = (
  first: number,
  bodies: readonly ({ call: Call } | { stores: StoreBatch })[],
): wire.GuestMessage =>
  create(wire.GuestMessageSchema, {
    kind: {
      case: "frames",
      value: {
        frames: bodies.map((b, i) =>
          encodeFrame({
            number: first + i,
            body:
              "call" in b ? { kind: "call", call: b.call } : { kind: "stores", batch: b.stores },
          }),
        ),
      },
    },
  });

/** `n` contextCreate frames numbered from `first`. */
export const creates = (first: number, n: number): wire.GuestMessage =>
  framesMsg(
    first,
    Array.from({ length: n }, () => ({ call: { op: "contextCreate" } as Call })),
  );

/** A Frames message whose one frame (number 1) has no body: it does not decode. */
export const undecodableMsg = (): wire.GuestMessage =>
  create(wire.GuestMessageSchema, {
    kind: { case: "frames", value: { frames: [create(wire.FrameSchema, { number: 1n })] } },
  });
