export {
  type AdapterIdentity,
  type CreateWebGpuOptions,
  createWebGpuExecutor,
  DAWN_EVENT_INTERVAL_US,
  openGpu,
  WEBGPU_PACKAGE_VERSION,
  type WebGpuBackend,
} from "./create.js";
export { dawnPollStats, EventPacer, isNativeCallback, paceDawnEvents } from "./dawn-pacing.js";
export { ExecutorDriver } from "./driver.js";
export { LAUNCH_KERNELS } from "./encode-launch.js";
export { WebGpuExecutor, type WebGpuExecutorOptions } from "./executor.js";
export {
  checkGoldenVectors,
  compareGolden,
  executorGoldenHash,
  GoldenMismatchError,
  type GoldenReport,
  goldenCaseOps,
} from "./golden.js";
export { GEMM_DEPTH, gemmWgsl } from "./wgsl/gemm.js";
export { PARAM_BYTES, PARAM_WORDS, PRELUDE } from "./wgsl/prelude.js";
