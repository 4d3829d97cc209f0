export {
  type AdapterIdentity,
  type CreateWebGpuOptions,
  createWebGpuExecutor,
  openGpu,
  WEBGPU_PACKAGE_VERSION,
  type WebGpuBackend,
} from "./create.js";
export { ExecutorDriver } from "./driver.js";
export { LAUNCH_KERNELS } from "./encode-launch.js";
export { WebGpuExecutor, type WebGpuExecutorOptions } from "./executor.js";
export {
  caseOps,
  checkGoldenVectors,
  compareGolden,
  executorCaseHashes,
  GoldenMismatchError,
  type GoldenReport,
  modelCaseHashes,
} from "./golden.js";
export {
  F32_SPECIAL_BITS,
  type KernelCase,
  kernelCases,
  mixedF32,
  seeded,
} from "./kernel-cases.js";
