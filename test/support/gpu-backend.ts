// The device config of a GPU test's node: device.backend webgpu (the real @vgpu-ha/gpu-webgpu,
// which fails the node — exit 2 — on a host without an adapter: the GPU tests then fail, never
// skip). VGPUHA_TEST_WEBGPU_MODULE=<file> swaps in another module with the same
// createWebGpuExecutor (test/dist/support/fake-webgpu.js: a smoke test of the harness on a host
// without a GPU; never a GPU result).
import { gpuWrap } from "@vgpu-ha/daemon";

export type Backend = "model" | "webgpu";

/** Config merged into a node of `backend`. */
export function backendConfig(backend: Backend): Record<string, unknown> {
  if (backend === "model") return { device: { backend: "model" } };
  const module = process.env.VGPUHA_TEST_WEBGPU_MODULE;
  return {
    device: { backend: "webgpu" },
    ...(module ? { testing: { webgpuModule: module } } : {}),
  };
}

/** A pairing of the GPU tests: the primary's backend, the standby's, and a name. */
export interface Pairing {
  readonly name: string;
  readonly primary: Backend;
  readonly standby: Backend;
}

export const PAIRINGS: readonly Pairing[] = [
  { name: "webgpu primary, model standby", primary: "webgpu", standby: "model" },
  { name: "webgpu primary, webgpu standby", primary: "webgpu", standby: "webgpu" },
];

/** The wraps placing the configured primary on GPU 0 and the standby on GPU 1 (if two). */
export function pairWraps(): { primary?: string[]; standby?: string[] } {
  const primary = gpuWrap(0);
  const standby = gpuWrap(1);
  return { ...(primary ? { primary } : {}), ...(standby ? { standby } : {}) };
}
