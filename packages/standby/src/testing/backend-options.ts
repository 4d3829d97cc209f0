// Small backend options for the standby's tests (a 1 MiB device, no tenants).
import { Backend, type BackendOptions } from "@vgpu-ha/gpu-model";
import { Receiver } from "../core/receiver.js";

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

/** A receiver holding an empty replica (adopted, not yet granted) at `epoch`. */
export function replicaReceiver(epoch = 3): Receiver {
  const r = new Receiver(
    { clusterId: "c", nodeId: "b", backendOptions: testBackendOptions() },
    epoch,
  );
  r.adopt(new Backend(testBackendOptions()), 0);
  return r;
}
