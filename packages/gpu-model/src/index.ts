export { BufferObject } from "./device/buffer-object.js";
export { Device, type DeviceArg, type DeviceOptions } from "./device/device.js";
export { DeviceCore, type DeviceCoreOptions } from "./device/device-core.js";
export { DeviceQueue, traceDeviceQueues } from "./device/device-queue.js";
export {
  type DeviceExecutor,
  type ExecutorFactory,
  type ExecutorSink,
  InlineExecutor,
  LatencyExecutor,
  ManualExecutor,
  type ScheduleFn,
} from "./device/executor.js";
export type { Failure } from "./device/failure.js";
export {
  type GoldenArg,
  type GoldenCase,
  type GoldenHash,
  goldenOutputHash,
  goldenVectors,
  modelGoldenHashes,
  runGoldenCaseOnModel,
} from "./device/kernels/golden-vectors.js";
export { KERNEL_CONTRACT_VERSION, KERNELS } from "./device/kernels/index.js";
export type { KernelSpec, Slot, SlotKind } from "./device/kernels/types.js";
export type { ChunkPages, ChunkResult, DeviceOp, OpResult } from "./device/ops.js";
export {
  type DeviceFailure,
  type DeviceProgress,
  InlineProgress,
} from "./device/progress.js";
export { PAGE_SIZE_BYTES } from "./device/vram.js";
export { VramBuffer } from "./device/vram-buffer.js";
export { computeDigest, digestOf, digestWhenDone, type StateDigest } from "./digest.js";
export {
  Backend,
  type BackendOptions,
  type FrameOutcome,
  type GuestBo,
  GuestContext,
  type TenantQuota,
} from "./paravirt/backend.js";
export { type EndedSession, EndedSessions } from "./paravirt/ended-sessions.js";
export type { DirtyPage, Extent } from "./paravirt/mmio-tracker.js";
export { sameSummary, summarizeResult } from "./paravirt/result-summary.js";
export type { SessionLimits } from "./paravirt/session-table.js";
export { SnapshotSink } from "./snapshot/snapshot-sink.js";
export { exportMeta, SnapshotSource } from "./snapshot/snapshot-source.js";
