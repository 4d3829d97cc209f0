// Asks a node how far a session got, the way a guest resuming it would: an Open with
// resume_session_id answers Opened with the session's last applied frame, or UNKNOWN_SESSION.
// Used at the end for sessions whose last frames' outcome the guest could not know (it failed
// while they were in flight). The stream is then dropped without Close: nothing changes.
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { createClient, ErrorCode, wire } from "@vgpu-ha/common";

export type ProbeAnswer =
  | { readonly kind: "held"; readonly lastFrame: number; readonly nodeId: string }
  | { readonly kind: "unknown-session" }
  | { readonly kind: "refused"; readonly code: number; readonly message: string };

export async function probeSession(
  endpoint: string,
  credentials: { tenant: string; token: string },
  sessionId: string,
  timeoutMs = 3000,
): Promise<ProbeAnswer> {
  const client = createClient(wire.Guest, endpoint, grpc.credentials.createInsecure());
  const stream = client.session();
  try {
    stream.write(
      create(wire.GuestMessageSchema, {
        kind: { case: "open", value: { ...credentials, resumeSessionId: sessionId } },
      }),
    );
    return await new Promise<ProbeAnswer>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${endpoint}: no answer`)), timeoutMs);
      stream.on("data", (m: wire.NodeMessage) => {
        clearTimeout(timer);
        if (m.kind.case === "opened") {
          resolve({
            kind: "held",
            lastFrame: Number(m.kind.value.lastFrame),
            nodeId: m.kind.value.nodeId,
          });
        } else if (m.kind.case === "error" && m.kind.value.code === ErrorCode.UNKNOWN_SESSION) {
          resolve({ kind: "unknown-session" });
        } else if (m.kind.case === "error") {
          resolve({ kind: "refused", code: m.kind.value.code, message: m.kind.value.message });
        } else {
          reject(new Error(`${endpoint}: unexpected ${m.kind.case}`));
        }
      });
      stream.on("error", (e: Error) => {
        clearTimeout(timer);
        reject(e);
      });
    });
  } finally {
    stream.cancel();
    client.close();
  }
}
