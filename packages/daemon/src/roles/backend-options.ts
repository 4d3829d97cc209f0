import type { Config } from "@vgpu-ha/common";
import type { BackendOptions } from "@vgpu-ha/gpu-model";

/** The backend's options from the config; `seedOffset` lets tests vary nothing else. */
export function backendOptions(config: Config, trackMmio: boolean): BackendOptions {
  return {
    device: config.device,
    tenants: new Map(
      config.tenants.map((t) => [t.name, { vramBytes: t.vramQuotaBytes, bos: t.boQuota }]),
    ),
    session: {
      replyCacheFrames: config.limits.replyCacheFrames,
      replyCacheBytes: config.limits.replyCacheBytes,
    },
    maxDmaBytes: config.limits.maxDmaBytes,
    maxStoresPerBatch: config.limits.maxStoresPerBatch,
    trackMmio,
  };
}
