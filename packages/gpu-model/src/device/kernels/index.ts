// The kernel library: every kernel the device can launch, by name.
import { addU32Kernel } from "./add-u32.js";
import { copyKernel } from "./copy.js";
import { fillKernel } from "./fill.js";
import { gemmF32Kernel } from "./gemm-f32.js";
import { histogramU32Kernel } from "./histogram-u32.js";
import { incrementU32Kernel } from "./increment-u32.js";
import { reduceSumF32Kernel } from "./reduce-sum-f32.js";
import { saxpyF32Kernel } from "./saxpy-f32.js";
import { stencil2dF32Kernel } from "./stencil2d-f32.js";
import type { KernelSpec } from "./types.js";

export { KERNEL_CONTRACT_VERSION } from "./contract.js";
export { CANONICAL_NAN_BITS } from "./f32.js";
export type {
  KernelBuffer,
  KernelRejection,
  KernelSpec,
  ResolvedArg,
  Slot,
  SlotKind,
} from "./types.js";
export {
  addU32Kernel,
  copyKernel,
  fillKernel,
  gemmF32Kernel,
  histogramU32Kernel,
  incrementU32Kernel,
  reduceSumF32Kernel,
  saxpyF32Kernel,
  stencil2dF32Kernel,
};

const ALL_KERNELS: readonly KernelSpec[] = [
  fillKernel,
  copyKernel,
  addU32Kernel,
  incrementU32Kernel,
  saxpyF32Kernel,
  gemmF32Kernel,
  reduceSumF32Kernel,
  stencil2dF32Kernel,
  histogramU32Kernel,
];

export const KERNELS: ReadonlyMap<string, KernelSpec> = new Map(
  ALL_KERNELS.map((kernel) => [kernel.name, kernel]),
);
