import type { Config } from "@vgpu-ha/common";
import type { BackendOptions } from "@vgpu-ha/gpu-model";
import type { SessionAdmissionLimits } from "@vgpu-ha/primary";
import { type DeviceSetup, modelExecutor } from "../device/device-setup.js";

/**
 * The backend's options from the config; the device's executors from the node's device setup
 * (absent: the CPU model as device.thread says).
 */
export function backendOptions(
  config: Config,
  trackMmio: boolean,
  device?: DeviceSetup,
): BackendOptions {
  return {
    device: config.device,
    tenants: new Map(
      config.tenants.map((t) => [
        t.name,
        { vramBytes: t.vramQuotaBytes, bos: t.boQuota, contexts: t.contextQuota },
      ]),
    ),
    session: {
      replyCacheFrames: config.limits.replyCacheFrames,
      replyCacheBytes: config.limits.replyCacheBytes,
    },
    maxDmaBytes: config.limits.maxDmaBytes,
    maxStoresPerBatch: config.limits.maxStoresPerBatch,
    trackMmio,
    executor: device ? device.executor : modelExecutor(config),
  };
}

/** The limits on new guest sessions (primary only: resumes and replication are not limited). */
export function sessionLimits(config: Config): SessionAdmissionLimits {
  const l = config.limits;
  return {
    maxSessionsPerTenant: l.maxSessionsPerTenant,
    maxSessionsTotal: l.maxSessionsTotal,
    opensPerSecond: l.sessionOpensPerSecond,
    openBurst: l.sessionOpenBurst,
  };
}
