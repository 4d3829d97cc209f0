// Golden vectors at start: the backend runs gpu-model's golden cases (goldenVectors(): fixed
// launches of every kernel on inputs that show each rule of the kernel contract) and compares
// each case's output hash with the model's (modelGoldenHashes(), computed in this process).
// Any difference refuses the backend with an error naming the kernel and the case: a driver or
// Dawn version that computes other bits (an FMA contracted, a subnormal kept, a NaN payload)
// must not serve.
import {
  type DeviceExecutor,
  type DeviceOp,
  type GoldenCase,
  type GoldenHash,
  goldenOutputHash,
  goldenVectors,
  modelGoldenHashes,
} from "@vgpu-ha/gpu-model";
import { ExecutorDriver } from "./driver.js";

/** Device ids of golden buffers: far from the paravirtual layer's, and freed afterwards. */
const GOLDEN_FIRST_ID = 0x7fff0000;

export interface GoldenReport {
  readonly cases: number;
  readonly kernels: readonly string[];
}

export class GoldenMismatchError extends Error {
  readonly kernel: string;
  readonly caseName: string;
  constructor(kernel: string, caseName: string, detail: string) {
    super(
      `webgpu: golden vector ${caseName} of kernel ${kernel} differs from the model (${detail}): ` +
        "this GPU, driver or Dawn computes other bits than kernel contract v2",
    );
    this.kernel = kernel;
    this.caseName = caseName;
  }
}

/** The operations of one case: allocate and fill its buffers, launch, read them, free them. */
export function goldenCaseOps(c: GoldenCase, firstId = GOLDEN_FIRST_ID): DeviceOp[] {
  const ids = c.buffers.map((_, i) => firstId + i);
  const ops: DeviceOp[] = [];
  c.buffers.forEach((words, i) => {
    const data = new Uint8Array(words.buffer, words.byteOffset, words.byteLength);
    ops.push({ k: "alloc", id: ids[i]!, size: words.byteLength });
    ops.push({ k: "write", id: ids[i]!, offset: 0, data: data.slice() });
  });
  const args = c.args.map((a) => (a.kind === "buffer" ? { buffer: ids[a.buffer]! } : a.value));
  ops.push({ k: "launch", kernel: c.kernel, args });
  c.buffers.forEach((words, i) => {
    ops.push({ k: "read", id: ids[i]!, offset: 0, length: words.byteLength });
  });
  for (const id of ids) ops.push({ k: "free", id });
  return ops;
}

/** A backend's output hash of a case (goldenOutputHash of its buffers after the launch). */
export async function executorGoldenHash(driver: ExecutorDriver, c: GoldenCase): Promise<string> {
  const results = await driver.run(goldenCaseOps(c));
  const first = c.buffers.length * 2 + 1;
  const buffers = c.buffers.map((_, i) => {
    const bytes = results[first + i] as Uint8Array;
    return new Uint32Array(bytes.slice().buffer);
  });
  return goldenOutputHash(buffers);
}

/**
 * Compares each case's hash from `actual` with the model's, in order; throws a
 * GoldenMismatchError naming the first case (and its kernel) that differs.
 */
export async function compareGolden(
  cases: readonly GoldenCase[],
  expected: readonly GoldenHash[],
  actual: (c: GoldenCase) => Promise<string>,
): Promise<GoldenReport> {
  const want = new Map(expected.map((h) => [h.name, h.hash]));
  for (const c of cases) {
    const model = want.get(c.name);
    if (model === undefined) throw new Error(`invariant: no model hash for golden case ${c.name}`);
    const got = await actual(c);
    if (got !== model)
      throw new GoldenMismatchError(c.kernel, c.name, `hash ${got}, model ${model}`);
  }
  return { cases: cases.length, kernels: [...new Set(cases.map((c) => c.kernel))] };
}

/** Runs every golden vector on `executor` through a driver of its own. */
export function checkGoldenVectors(executor: DeviceExecutor): Promise<GoldenReport> {
  const driver = new ExecutorDriver(executor);
  return compareGolden(goldenVectors(), modelGoldenHashes(), (c) => executorGoldenHash(driver, c));
}
