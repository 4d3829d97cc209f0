// Golden vectors at start: the backend runs fixed launches of every kernel (kernel-cases.ts)
// and compares the hashes of every buffer afterwards with the model's (gpu-model's DeviceCore
// running the same operations in this process). Any difference refuses the backend with an
// error naming the kernel and the case: a driver or Dawn version that computes other bits
// (an FMA contracted, a subnormal kept, a NaN payload) must not serve.
import { DeviceCore, type DeviceExecutor, type DeviceOp } from "@vgpu-ha/gpu-model";
import { ExecutorDriver } from "./driver.js";
import { caseBufferBytes, type KernelCase, kernelCases } from "./kernel-cases.js";

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
      `webgpu: golden vector of kernel ${kernel} (${caseName}) differs from the model: ${detail}`,
    );
    this.kernel = kernel;
    this.caseName = caseName;
  }
}

/** The operations of one case: allocate and fill its buffers, launch, hash them, free them. */
export function caseOps(c: KernelCase, firstId = GOLDEN_FIRST_ID): DeviceOp[] {
  const ids = c.buffers.map((_, i) => firstId + i);
  const ops: DeviceOp[] = [];
  c.buffers.forEach((data, i) => {
    ops.push({ k: "alloc", id: ids[i]!, size: caseBufferBytes(data) });
    ops.push({ k: "write", id: ids[i]!, offset: 0, data });
  });
  const args = c.args.map((a) => (typeof a === "number" ? a : { buffer: ids[a.buffer]! }));
  ops.push({ k: "launch", kernel: c.kernel, args });
  ops.push({ k: "hash", ids });
  for (const id of ids) ops.push({ k: "free", id });
  return ops;
}

const HASH_AT = (c: KernelCase) => c.buffers.length * 2 + 1;

/** The model's hashes of a case's buffers after its launch. */
export function modelCaseHashes(c: KernelCase): readonly string[] {
  const core = new DeviceCore();
  const results = caseOps(c).map((op) => core.execute(op));
  return results[HASH_AT(c)] as readonly string[];
}

/** A backend's hashes of a case's buffers after its launch. */
export async function executorCaseHashes(driver: ExecutorDriver, c: KernelCase) {
  const results = await driver.run(caseOps(c));
  return results[HASH_AT(c)] as readonly string[];
}

/**
 * Compares each case's hashes from `actual` with `expected`, in order; throws a
 * GoldenMismatchError naming the first kernel that differs.
 */
export async function compareGolden(
  cases: readonly KernelCase[],
  expected: (c: KernelCase) => readonly string[],
  actual: (c: KernelCase) => Promise<readonly string[]>,
): Promise<GoldenReport> {
  for (const c of cases) {
    const want = expected(c);
    const got = await actual(c);
    const differ = want.findIndex((h, i) => got[i] !== h);
    if (differ >= 0 || got.length !== want.length) {
      throw new GoldenMismatchError(
        c.kernel,
        c.name,
        `buffer ${differ} hash ${got[differ]} != model ${want[differ]}`,
      );
    }
  }
  return { cases: cases.length, kernels: [...new Set(cases.map((c) => c.kernel))] };
}

/** Runs the golden vectors on `executor` (attached to a driver of its own for the check). */
export function checkGoldenVectors(
  executor: DeviceExecutor,
  cases = kernelCases(),
): Promise<GoldenReport> {
  const driver = new ExecutorDriver(executor);
  return compareGolden(cases, modelCaseHashes, (c) => executorCaseHashes(driver, c));
}
