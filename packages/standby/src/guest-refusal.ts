// A standby's guest port: every stream is told NOT_PRIMARY, with the primary's address when
// known, so guests go to the node that serves them.
import { create } from "@bufbuild/protobuf";
import { ErrorCode, type ServiceHandlers, wire } from "@vgpu-ha/common";

export function refuseGuests(redirect: () => string): ServiceHandlers<typeof wire.Guest> {
  return {
    session: (stream) => {
      stream.on("error", () => undefined);
      stream.on("data", () => undefined);
      stream.write(
        create(wire.NodeMessageSchema, {
          kind: {
            case: "error",
            value: {
              code: ErrorCode.NOT_PRIMARY,
              message: "this node is the standby",
              redirect: redirect(),
            },
          },
        }),
      );
      stream.end();
    },
  };
}
