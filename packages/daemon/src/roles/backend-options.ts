import type { Config } from "@vgpu-ha/common";
import type { BackendOptions } from "@vgpu-ha/gpu-model";
import { workerExecutor } from "@vgpu-ha/gpu-model/worker";
import type { SessionAdmissionLimits } from "@vgpu-ha/primary";

/** The backend's options from the config; `seedOffset` lets tests vary nothing else. */
export function backendOptions(config: Config, trackMmio: boolean): BackendOptions {
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
    executor:
      config.device.thread === "worker"
        ? workerExecutor({
            maxCallMs: config.device.maxCallMs,
            kernelDelayMs: config.testing.kernelDelayMs,
            ...(config.testing.kernelDelayOnly !== undefined
              ? { kernelDelayOnly: config.testing.kernelDelayOnly }
              : {}),
          })
        : undefined,
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
