// Small backend options for the standby's tests (a 1 MiB device, no tenants).
import type { BackendOptions } from "@vgpu-ha/gpu-model";

export function testBackendOptions(): BackendOptions {
  return {
    device: { seed: 1, vramBytes: 1 << 20, maxBoBytes: 1 << 20, maxKernelWork: 1 << 20 },
    tenants: new Map(),
    session: { replyCacheFrames: 16, replyCacheBytes: 1 << 16 },
    maxDmaBytes: 1 << 16,
    maxStoresPerBatch: 16,
    trackMmio: false,
  };
}
