// The load's heavy kernels (issue #14): gemm_f32 launches of about 20 ms in the mix, so chaos
// runs kill and pause nodes while a device is busy for a while. Each session owns three square
// matrices X, Y, Z; launches alternate X ← Y·Z and Y ← X·Z, so each depends on the one before
// (run twice or skipped, the state differs from the reference replay), and each is followed by
// a readback of the first 4 KiB of its output, so its result is also in a reply the checker
// compares with the replay's.
import type { FrameBody } from "@vgpu-ha/common";

/**
 * The side of the default gemm (m = n = k): 2·224³ ≈ 22.5 MFLOP — 22 ms a launch measured on
 * this 2-core machine under the shared load of a run, about 12 ms on a quiet core (gemm_f32's
 * 1.9 GFLOP/s by CPU time in bench/results/hot-paths.json).
 */
export const GEMM_SIDE_DEFAULT = 224;
/** One heavy launch (with its readback) every this many workload frames of a session. */
export const HEAVY_EVERY = 40;
/** Bytes of the output read back after each launch. */
const READBACK_BYTES = 4096;

/** A session's matrices (guest handles) in its counter's context. */
export interface HeavyBuffers {
  readonly context: number;
  readonly x: number;
  readonly y: number;
  readonly z: number;
  readonly side: number;
}

export const matrixBytes = (side: number) => side * side * 4;

/**
 * A seeded side×side float32 matrix, entries uniform in ±sqrt(3/side): a product with it keeps
 * the other factor's magnitude, so a long ping-pong neither vanishes nor overflows.
 */
export function seededMatrix(seed: number, side: number): Uint8Array {
  const f = new Float32Array(side * side);
  const bound = Math.sqrt(3 / side);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < f.length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    f[i] = ((s >>> 0) / 2 ** 32) * 2 * bound - bound;
  }
  return new Uint8Array(f.buffer);
}

/** The `index`-th heavy launch of a session: X ← Y·Z when even, Y ← X·Z when odd. */
export function gemmFrame(h: HeavyBuffers, index: number): FrameBody {
  const [out, input] = index % 2 === 0 ? [h.x, h.y] : [h.y, h.x];
  return {
    kind: "call",
    call: {
      op: "kernelLaunch",
      context: h.context,
      kernel: "gemm_f32",
      args: [
        { kind: "buffer", bo: out },
        { kind: "buffer", bo: input },
        { kind: "buffer", bo: h.z },
        { kind: "u32", value: h.side },
        { kind: "u32", value: h.side },
        { kind: "u32", value: h.side },
      ],
    },
  };
}

/** Reads back the output of the `index`-th launch. */
export function readbackFrame(h: HeavyBuffers, index: number): FrameBody {
  const bo = index % 2 === 0 ? h.x : h.y;
  const length = Math.min(READBACK_BYTES, matrixBytes(h.side));
  return { kind: "call", call: { op: "dmaRead", context: h.context, bo, offset: 0, length } };
}
