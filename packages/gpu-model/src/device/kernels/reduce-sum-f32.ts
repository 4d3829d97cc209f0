// reduce_sum_f32(out, in, n): out.f32[0] = the sum of in[0..n) by a fixed tree (kernel contract
// v2), the shape a GPU computes it in: a sequential sum in index order runs 1000× slower on a
// GPU than a tree (../shared/GPU.md), so the order that defines the result is the tree's.
//   A block of up to 2048 elements is summed by 256 lanes: lane t adds elements t, t+256, …,
//   t+1792 of the block (those that exist) in that order into +0; then a halving tree adds lane
//   t+stride into lane t for stride = 128, 64, …, 1; the block's value is lane 0.
//   A pass maps a vector of length L to ceil(L/2048) block values; passes repeat until one value
//   is left. n = 0 gives +0.
// Every addition is rounded to float32 and flushed (f32.ts: operands and results lose a
// subnormal to a zero of its sign); the result is stored with the canonical NaN. out may not
// alias in.
import { bufferArg, checkDistinct, checkFits, scalarArg } from "./args.js";
import { CANONICAL_NAN_BITS, ftz } from "./f32.js";
import type { KernelSpec, ResolvedArg } from "./types.js";

/** Elements per block: LANES lanes × LOADS_PER_LANE loads each. */
export const REDUCE_BLOCK = 2048;
const LANES = 256;
const LOADS_PER_LANE = REDUCE_BLOCK / LANES;
/** The lanes' running sums, float32 values held in doubles (exact). */
const lanes = new Float64Array(LANES);

function unpack(args: readonly ResolvedArg[]) {
  return { out: bufferArg(args, 0), input: bufferArg(args, 1), n: scalarArg(args, 2) };
}

/** The lanes of a whole block of 2048 elements of `values` from `base`: each lane's eight
 * loads in a local (this is most of the work, and the order is the same as partialLanes'). */
function wholeLanes(values: Float32Array, base: number) {
  const f = Math.fround;
  for (let t = 0, i = base; t < LANES; t++, i++) {
    let acc = ftz(f(0 + ftz(values[i]!)));
    acc = ftz(f(acc + ftz(values[i + 256]!)));
    acc = ftz(f(acc + ftz(values[i + 512]!)));
    acc = ftz(f(acc + ftz(values[i + 768]!)));
    acc = ftz(f(acc + ftz(values[i + 1024]!)));
    acc = ftz(f(acc + ftz(values[i + 1280]!)));
    acc = ftz(f(acc + ftz(values[i + 1536]!)));
    acc = ftz(f(acc + ftz(values[i + 1792]!)));
    lanes[t] = acc;
  }
}

/** The lanes of a block of `count` (1..2047) elements: lanes past the data stay +0. */
function partialLanes(values: Float32Array, base: number, count: number) {
  const f = Math.fround;
  lanes.fill(0);
  for (let r = 0; r < LOADS_PER_LANE; r++) {
    const start = base + r * LANES;
    const end = start + Math.min(LANES, count - r * LANES);
    for (let i = start, t = 0; i < end; i++, t++) {
      lanes[t] = ftz(f(lanes[t]! + ftz(values[i]!)));
    }
  }
}

/** The value of the block of `count` (1..2048) elements of `values` from `base`. */
function reduceBlock(values: Float32Array, base: number, count: number): number {
  if (count === REDUCE_BLOCK) wholeLanes(values, base);
  else partialLanes(values, base, count);
  const f = Math.fround;
  for (let stride = LANES / 2; stride >= 1; stride >>= 1) {
    for (let t = 0; t < stride; t++) lanes[t] = ftz(f(lanes[t]! + lanes[t + stride]!));
  }
  return lanes[0]!;
}

/** One pass: the block values of values[0..length) (float32 values: a Float32Array holds
 * them exactly, and keeps every pass on one array type for the JIT). */
function reducePass(values: Float32Array, length: number): Float32Array {
  const blocks = Math.ceil(length / REDUCE_BLOCK);
  const partials = new Float32Array(blocks);
  for (let w = 0; w < blocks; w++) {
    const base = w * REDUCE_BLOCK;
    partials[w] = reduceBlock(values, base, Math.min(REDUCE_BLOCK, length - base));
  }
  return partials;
}

/** The tree sum of values[0..n): +0 for n = 0. */
export function reduceTree(values: Float32Array, n: number): number {
  if (n === 0) return 0;
  let level = reducePass(values, n);
  while (level.length > 1) level = reducePass(level, level.length);
  return level[0]!;
}

/** Work units per element, measured (bench/kernel-speed.ts): the tree with its flush checks
 * costs about 2.3x the sequential sum of contract v1 (2 units an element) on this CPU. */
const WORK_PER_ELEMENT = 5;

export const reduceSumF32Kernel: KernelSpec = {
  name: "reduce_sum_f32",
  slots: [
    { name: "out", kind: "buffer" },
    { name: "in", kind: "buffer" },
    { name: "n", kind: "u32" },
  ],
  validate(args) {
    const { out, input, n } = unpack(args);
    return checkDistinct("out", out, "in", input) ?? checkFits("in", input, n);
  },
  work(args) {
    return unpack(args).n * WORK_PER_ELEMENT;
  },
  run(args) {
    const { out, input, n } = unpack(args);
    const sum = reduceTree(input.f32, n);
    if (Number.isNaN(sum)) out.u32[0] = CANONICAL_NAN_BITS;
    else out.f32[0] = sum;
  },
};
