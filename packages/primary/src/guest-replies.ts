// The guest sessions machine's replies as wire messages (the driver's edge: the machine speaks
// domain types, the stream carries protobuf-es objects).
import { create } from "@bufbuild/protobuf";
import { encodeFrameResult, wire } from "@vgpu-ha/common";
import type { GuestReply } from "./core/guest-session-types.js";

export function encodeReply(reply: GuestReply): wire.NodeMessage {
  switch (reply.kind) {
    case "opened":
      return create(wire.NodeMessageSchema, {
        kind: {
          case: "opened",
          value: {
            sessionId: reply.sessionId,
            epoch: BigInt(reply.epoch),
            lastFrame: BigInt(reply.lastFrame),
            nodeId: reply.nodeId,
          },
        },
      });
    case "acks":
      return create(wire.NodeMessageSchema, {
        kind: {
          case: "acks",
          value: {
            epoch: BigInt(reply.epoch),
            ackedThrough: BigInt(reply.ackedThrough),
            results: reply.results.map((r) => encodeFrameResult(r.number, r.result)),
          },
        },
      });
    case "closed":
      return create(wire.NodeMessageSchema, { kind: { case: "closed", value: {} } });
    case "error": {
      const { code, message, redirect } = reply;
      return create(wire.NodeMessageSchema, {
        kind: { case: "error", value: { code, message, redirect } },
      });
    }
  }
}
