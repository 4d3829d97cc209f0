// The canonical state digest: a hash of everything guests can observe, independent of device
// handles and VRAM placement. Equal digests on two nodes mean the replica is exact.
//   gpu:      contexts (guest handle, tenant, owner session, counters) and their buffers
//             (guest handle, size, mapped, contents), plus the next context handle;
//   sessions: the session table (id, tenant, last frame, cached replies);
//   state:    both together.
import { createHash, type Hash } from "node:crypto";
import type { CallResult } from "@vgpu-ha/common";
import type { Backend } from "./paravirt/backend.js";

export interface StateDigest {
  readonly gpu: string;
  readonly sessions: string;
  readonly state: string;
}

const byKey = <T>(entries: Iterable<[number, T]>): [number, T][] =>
  [...entries].sort((a, b) => a[0] - b[0]);

export function computeDigest(backend: Backend): StateDigest {
  const gpu = createHash("sha256");
  gpu.update("vgpu-gpu-v1\n");
  putNumbers(gpu, backend.nextContextHandle);
  for (const [handle, ctx] of byKey(backend.contexts)) {
    putNumbers(gpu, handle, ctx.nextBoHandle, ctx.fenceValue, ctx.bos.size);
    putString(gpu, ctx.tenant);
    putString(gpu, ctx.sessionId);
    for (const [boHandle, gbo] of byKey(ctx.bos)) {
      putNumbers(gpu, boHandle, gbo.bo.byteLength, gbo.bo.mapped ? 1 : 0);
      gpu.update(gbo.bo.bytes);
    }
  }
  const sessions = createHash("sha256");
  sessions.update("vgpu-sessions-v1\n");
  const ids = [...backend.sessions.keys()].sort();
  for (const id of ids) {
    const session = backend.sessions.get(id)!;
    putString(sessions, id);
    putString(sessions, session.tenant);
    putNumbers(sessions, session.lastFrame, session.replies.size);
    for (const [frame, reply] of byKey(session.replies)) {
      putNumbers(sessions, frame);
      putReply(sessions, reply);
    }
  }
  const gpuHex = gpu.digest("hex");
  const sessionsHex = sessions.digest("hex");
  const state = createHash("sha256").update(gpuHex).update(sessionsHex).digest("hex");
  return { gpu: gpuHex, sessions: sessionsHex, state };
}

function putNumbers(hash: Hash, ...values: number[]): void {
  const buf = Buffer.allocUnsafe(8 * values.length);
  for (const [i, v] of values.entries()) buf.writeDoubleLE(v, i * 8);
  hash.update(buf);
}

function putString(hash: Hash, s: string): void {
  const bytes = Buffer.from(s, "utf8");
  putNumbers(hash, bytes.length);
  hash.update(bytes);
}

function putReply(hash: Hash, reply: CallResult): void {
  putNumbers(hash, reply.code);
  putString(hash, reply.output.kind);
  switch (reply.output.kind) {
    case "handle":
      putNumbers(hash, reply.output.handle);
      break;
    case "fence":
      putNumbers(hash, reply.output.value);
      break;
    case "data":
      putNumbers(hash, reply.output.data.byteLength);
      hash.update(reply.output.data);
      break;
    case "none":
      break;
  }
}
