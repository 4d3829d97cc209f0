// The canonical state digest: a hash of everything guests can observe, independent of device
// handles and VRAM placement. Equal digests on two nodes mean the replica is exact.
//   gpu:      contexts (guest handle, tenant, owner session, counters) and their buffers
//             (guest handle, size, mapped, contents), plus the next context handle;
//   sessions: the session table (id, tenant, last frame, cached replies);
//   state:    both together.
import { createHash, type Hash } from "node:crypto";
import type { CallResult } from "@vgpu-ha/common/core";
import type { Backend } from "./paravirt/backend.js";

export interface StateDigest {
  readonly gpu: string;
  readonly sessions: string;
  readonly state: string;
}

const byKey = <T>(entries: Iterable<[number, T]>): [number, T][] =>
  [...entries].sort((a, b) => a[0] - b[0]);

export function computeDigest(backend: Backend): StateDigest {
  const gpu = new BufferedHash();
  gpu.bytes(Buffer.from("vgpu-gpu-v1\n"));
  gpu.number(backend.nextContextHandle);
  for (const [handle, ctx] of byKey(backend.contexts)) {
    gpu.number(handle).number(ctx.nextBoHandle).number(ctx.fenceValue).number(ctx.bos.size);
    gpu.string(ctx.tenant).string(ctx.sessionId);
    for (const [boHandle, gbo] of byKey(ctx.bos)) {
      gpu
        .number(boHandle)
        .number(gbo.bo.byteLength)
        .number(gbo.bo.mapped ? 1 : 0);
      gpu.bytes(gbo.bo.bytes);
    }
  }
  const sessions = new BufferedHash();
  sessions.bytes(Buffer.from("vgpu-sessions-v1\n"));
  const ids = [...backend.sessions.keys()].sort();
  for (const id of ids) {
    const session = backend.sessions.get(id)!;
    sessions.string(id).string(session.tenant);
    sessions.number(session.lastFrame).number(session.replies.size);
    for (const [frame, reply] of byKey(session.replies)) {
      sessions.number(frame);
      putReply(sessions, reply);
    }
  }
  const gpuHex = gpu.hex();
  const sessionsHex = sessions.hex();
  const state = createHash("sha256").update(gpuHex).update(sessionsHex).digest("hex");
  return { gpu: gpuHex, sessions: sessionsHex, state };
}

/**
 * The digest of the state as it is now, delivered once the device has done the work submitted
 * so far (possibly before returning). The metadata is taken at the call, the bytes at the
 * device's point in the same order, so later calls do not leak into it.
 */
export function digestWhenDone(backend: Backend, callback: (digest: StateDigest) => void): void {
  // The GPU model computes synchronously: the bytes are final now, only the telling waits.
  const digest = computeDigest(backend);
  backend.progress.afterDevice(() => callback(digest));
}

/**
 * SHA-256 over a stream of numbers (f64 LE), length-prefixed strings and raw bytes. Small
 * pieces are gathered in a buffer and hashed together: the same bytes, far fewer calls.
 */
class BufferedHash {
  private readonly hash: Hash = createHash("sha256");
  private readonly buf = Buffer.allocUnsafe(64 * 1024);
  private used = 0;

  number(v: number): this {
    if (this.used + 8 > this.buf.length) this.flush();
    this.buf.writeDoubleLE(v, this.used);
    this.used += 8;
    return this;
  }

  string(s: string): this {
    const bytes = Buffer.from(s, "utf8");
    return this.number(bytes.length).bytes(bytes);
  }

  bytes(b: Uint8Array): this {
    if (b.byteLength > 4096) {
      this.flush();
      this.hash.update(b);
    } else {
      if (this.used + b.byteLength > this.buf.length) this.flush();
      this.buf.set(b, this.used);
      this.used += b.byteLength;
    }
    return this;
  }

  hex(): string {
    this.flush();
    return this.hash.digest("hex");
  }

  private flush(): void {
    if (this.used > 0) this.hash.update(this.buf.subarray(0, this.used));
    this.used = 0;
  }
}

function putReply(hash: BufferedHash, reply: CallResult): void {
  hash.number(reply.code).string(reply.output.kind);
  switch (reply.output.kind) {
    case "handle":
      hash.number(reply.output.handle);
      break;
    case "fence":
      hash.number(reply.output.value);
      break;
    case "data":
      hash.number(reply.output.data.byteLength).bytes(reply.output.data);
      break;
    case "none":
      break;
  }
}
