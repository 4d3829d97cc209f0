// The canonical state digest: a hash of everything guests can observe, independent of device
// handles and VRAM placement. Equal digests on two nodes mean the replica is exact.
//   gpu:      contexts (guest handle, tenant, owner session, counters) and their buffers
//             (guest handle, size, mapped, and the SHA-256 of their contents), plus the next
//             context handle;
//   sessions: the session table (id, tenant, last frame, cached replies);
//   state:    both together.
// The metadata is taken when asked, on the main thread; each buffer's bytes are hashed on the
// device at that point of its order (issue #14), so later calls do not leak into it.
import { createHash, type Hash } from "node:crypto";
import type { CallResult } from "@vgpu-ha/common/core";
import type { BufferObject } from "./device/buffer-object.js";
import type { Backend } from "./paravirt/backend.js";

export interface StateDigest {
  readonly gpu: string;
  readonly sessions: string;
  readonly state: string;
}

const byKey = <T>(entries: Iterable<[number, T]>): [number, T][] =>
  [...entries].sort((a, b) => a[0] - b[0]);

/** The state's metadata as it was when captured, and the buffers whose bytes it needs. */
interface Captured {
  readonly buffers: readonly BufferObject[];
  /** Finishes the digest with one SHA-256 hex per buffer, in `buffers` order. */
  finish(hashes: readonly string[]): StateDigest;
}

function capture(backend: Backend): Captured {
  const gpu = new Pieces();
  gpu.bytes(Buffer.from("vgpu-gpu-v2\n"));
  gpu.number(backend.nextContextHandle);
  // Per buffer, where its hash goes: the gpu stream is finished with the hashes in order.
  const buffers: BufferObject[] = [];
  const pieces: Buffer[] = [];
  for (const [handle, ctx] of byKey(backend.contexts)) {
    gpu.number(handle).number(ctx.nextBoHandle).number(ctx.fenceValue).number(ctx.bos.size);
    gpu.string(ctx.tenant).string(ctx.sessionId);
    for (const [boHandle, gbo] of byKey(ctx.bos)) {
      gpu
        .number(boHandle)
        .number(gbo.bo.byteLength)
        .number(gbo.bo.mapped ? 1 : 0);
      pieces.push(gpu.cut());
      buffers.push(gbo.bo);
    }
  }
  const tail = gpu.cut();
  // Replies are kept by reference: a dmaRead's data is filled by the device before the hashes
  // of this digest come back, since the reads were queued first.
  const sessions = [...backend.sessions.keys()].sort().map((id) => {
    const s = backend.sessions.get(id)!;
    return { id, tenant: s.tenant, lastFrame: s.lastFrame, replies: byKey(s.replies) };
  });
  return {
    buffers,
    finish(hashes) {
      const g = createHash("sha256");
      for (const [i, piece] of pieces.entries()) g.update(piece).update(hashes[i]!);
      const gpuHex = g.update(tail).digest("hex");
      const sh = new BufferedHash();
      sh.bytes(Buffer.from("vgpu-sessions-v1\n"));
      for (const s of sessions) {
        sh.string(s.id).string(s.tenant);
        sh.number(s.lastFrame).number(s.replies.length);
        for (const [frame, reply] of s.replies) {
          sh.number(frame);
          putReply(sh, reply);
        }
      }
      const sessionsHex = sh.hex();
      const state = createHash("sha256").update(gpuHex).update(sessionsHex).digest("hex");
      return { gpu: gpuHex, sessions: sessionsHex, state };
    },
  };
}

/**
 * The digest of the state now, synchronously: only where the device runs inline (tests,
 * tools); with a device thread it throws (use digestWhenDone).
 */
export function computeDigest(backend: Backend): StateDigest {
  let digest: StateDigest | undefined;
  digestWhenDone(backend, (d) => {
    digest = d;
  });
  if (digest === undefined) {
    throw new Error("computeDigest needs the inline device; use digestWhenDone");
  }
  return digest;
}

/**
 * The digest of the state as it is now, delivered once the device has hashed the buffers at
 * this point of its order (possibly before returning). The metadata is taken at the call, the
 * bytes at the device's point in the same order, so later calls do not leak into it. Never
 * called if the device fails.
 */
export function digestWhenDone(backend: Backend, callback: (digest: StateDigest) => void): void {
  const captured = capture(backend);
  backend.device.hashBuffers(captured.buffers, (hashes) => callback(captured.finish(hashes)));
}

/** The gpu stream's metadata, cut into pieces between which buffer hashes go later. */
class Pieces {
  private parts: Buffer[] = [];

  number(v: number): this {
    const b = Buffer.allocUnsafe(8);
    b.writeDoubleLE(v);
    this.parts.push(b);
    return this;
  }

  string(s: string): this {
    const bytes = Buffer.from(s, "utf8");
    return this.number(bytes.length).bytes(bytes);
  }

  bytes(b: Uint8Array): this {
    this.parts.push(Buffer.from(b));
    return this;
  }

  /** Everything written since the last cut. */
  cut(): Buffer {
    const piece = Buffer.concat(this.parts);
    this.parts = [];
    return piece;
  }
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
