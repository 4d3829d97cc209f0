// The seeded workload as an application on the client library can send it: a frame the
// library refuses when it is made (a value that does not fit its wire field: the call is
// rejected MALFORMED locally and takes no frame number) is not issued, and each session's later
// frames are numbered on; each frame is as the wire carries it (f32 arguments rounded to
// float32), which is what the node applies and the checker replays. The replication simulator
// still feeds such frames to the backend.
import { invalidCall, invalidStores } from "@vgpu-ha/client";
import { decodeFrame, encodeFrame, type FrameBody, MalformedError } from "@vgpu-ha/common";
import type { Workload } from "../workload.js";

/** Why the client library refuses this frame before numbering it; null when it sends it. */
export function refusedByClient(body: FrameBody): string | null {
  return body.kind === "call" ? invalidCall(body.call) : invalidStores(body.batch);
}

export function wireWorkload(workload: Workload): Workload {
  const numbers = new Map<string, number>();
  const steps = [];
  for (const step of workload.steps) {
    if (step.expect.outcome !== "applied") {
      throw new Error("the failover workload re-sends no frames (resendPercent 0)");
    }
    if (refusedByClient(step.frame.body) !== null) continue;
    const number = (numbers.get(step.session) ?? 0) + 1;
    numbers.set(step.session, number);
    const frame = decodeFrame(encodeFrame({ number, body: step.frame.body }));
    if (frame instanceof MalformedError) throw frame; // the library sent what no node reads
    steps.push({ ...step, frame });
  }
  return { ...workload, steps };
}
