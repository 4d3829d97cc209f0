// Kernel launches, encoded into a batch (contract v2, WGSL in wgsl/). The paravirtual layer
// validated every launch, so arguments fit their buffers. An input that is also the launch's
// output (add_u32, saxpy_f32 allow it; each element is read before it is written) is staged
// into a temporary first, so no buffer is bound both writable and read-only in one dispatch.
import type { Batch } from "./batch.js";
import type { GpuBufferEntry } from "./buffers.js";
import { patch } from "./encode-memory.js";
import { groupsOf256, reducePassLengths } from "./plan/grid.js";
import { GEMM_TILE, REDUCE_BLOCK } from "./wgsl/index.js";

/** A launch argument with its buffer resolved. */
export type LaunchArg = GpuBufferEntry | number;

const f32Bits = (value: number): number => {
  const f = new Float32Array([value]);
  return new Uint32Array(f.buffer)[0]!;
};

function buf(args: readonly LaunchArg[], i: number): GpuBufferEntry {
  const a = args[i];
  if (a === undefined || typeof a === "number")
    throw new Error(`invariant: argument ${i} is not a buffer`);
  return a;
}

function num(args: readonly LaunchArg[], i: number): number {
  const a = args[i];
  if (typeof a !== "number") throw new Error(`invariant: argument ${i} is not a scalar`);
  return a;
}

/** `input` itself, or a staged copy of its first `bytes` when it is also the output. */
function readable(batch: Batch, input: GpuBufferEntry, output: GpuBufferEntry, bytes: number) {
  if (input !== output) return input.gpu;
  const copy = batch.temporary(bytes);
  batch.copy(input.gpu, 0, copy, 0, bytes);
  return copy;
}

type Encoder = (batch: Batch, args: readonly LaunchArg[]) => void;

const LAUNCHES: Record<string, Encoder> = {
  fill(batch, args) {
    const n = num(args, 1);
    batch.dispatch("fill", [n, num(args, 2)], [buf(args, 0).gpu], groupsOf256(n));
  },
  copy(batch, args) {
    const dst = buf(args, 0);
    const src = buf(args, 1);
    // Copying a buffer object onto itself is the identity.
    if (dst !== src) batch.copy(src.gpu, 0, dst.gpu, 0, num(args, 2) * 4);
  },
  add_u32(batch, args) {
    const dst = buf(args, 0);
    const n = num(args, 3);
    if (n === 0) return;
    const a = readable(batch, buf(args, 1), dst, n * 4);
    const b = buf(args, 2) === buf(args, 1) ? a : readable(batch, buf(args, 2), dst, n * 4);
    batch.dispatch("add_u32", [n], [dst.gpu, a, b], groupsOf256(n));
  },
  increment_u32(batch, args) {
    const n = num(args, 1);
    batch.dispatch("increment_u32", [n, num(args, 2)], [buf(args, 0).gpu], groupsOf256(n));
  },
  saxpy_f32(batch, args) {
    const y = buf(args, 0);
    const n = num(args, 2);
    if (n === 0) return;
    const x = readable(batch, buf(args, 1), y, n * 4);
    batch.dispatch("saxpy_f32", [n, f32Bits(num(args, 3))], [y.gpu, x], groupsOf256(n));
  },
  gemm_f32(batch, args) {
    const [m, n, k] = [num(args, 3), num(args, 4), num(args, 5)];
    if (m === 0 || n === 0) return;
    const tilesX = Math.ceil(n / GEMM_TILE);
    const tiles = tilesX * Math.ceil(m / GEMM_TILE);
    batch.dispatch(
      "gemm_f32",
      [m, n, k, tilesX],
      [buf(args, 0).gpu, buf(args, 1).gpu, buf(args, 2).gpu],
      tiles,
    );
  },
  reduce_sum_f32(batch, args) {
    const out = buf(args, 0);
    const n = num(args, 2);
    if (n === 0) {
      patch(batch, out.gpu, [{ word: 0, mask: 0xffffffff, value: 0, xor: 0 }]);
      return;
    }
    const lengths = reducePassLengths(n, REDUCE_BLOCK);
    const passes = lengths.length - 1;
    const scratch: GPUBuffer[] = [];
    let from = buf(args, 1).gpu;
    for (let i = 0; i < passes; i++) {
      const groups = lengths[i + 1]!;
      let to = out.gpu;
      if (i < passes - 1) {
        scratch[i % 2] ??= batch.temporary(groups * 4);
        to = scratch[i % 2]!;
      }
      batch.dispatch("reduce_pass", [lengths[i]!], [to, from], groups);
      from = to;
    }
  },
  stencil2d_f32(batch, args) {
    const dst = buf(args, 0);
    const src = buf(args, 1);
    const [width, height, iterations] = [num(args, 2), num(args, 3), num(args, 4)];
    const cells = width * height;
    if (iterations === 0) {
      batch.copy(src.gpu, 0, dst.gpu, 0, cells * 4);
      return;
    }
    const scratch: GPUBuffer[] = [];
    let from = src.gpu;
    for (let i = 0; i < iterations; i++) {
      let to = dst.gpu;
      if (i < iterations - 1) {
        scratch[i % 2] ??= batch.temporary(cells * 4);
        to = scratch[i % 2]!;
      }
      const scalars = [width, height, f32Bits(num(args, 5)), cells];
      batch.dispatch("stencil_step", scalars, [to, from], groupsOf256(cells));
      from = to;
    }
  },
  histogram_u32(batch, args) {
    const hist = buf(args, 0).gpu;
    const [n, bins] = [num(args, 2), num(args, 3)];
    batch.dispatch("histogram_clear", [n, bins], [hist], groupsOf256(bins));
    batch.dispatch("histogram_count", [n, bins], [hist, buf(args, 1).gpu], groupsOf256(n));
  },
};

/** The kernels this backend runs (every kernel of the model's library). */
export const LAUNCH_KERNELS: readonly string[] = Object.keys(LAUNCHES);

export function launch(batch: Batch, kernel: string, args: readonly LaunchArg[]): void {
  const encode = LAUNCHES[kernel];
  if (encode === undefined) throw new Error(`invariant: no kernel ${kernel} on the WebGPU device`);
  encode(batch, args);
}
