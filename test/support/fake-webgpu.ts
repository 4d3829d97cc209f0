// A stand-in for @vgpu-ha/gpu-webgpu on hosts without a GPU (config testing.webgpuModule names
// its built file): createWebGpuExecutor answers a made-up adapter and runs the device on the
// CPU model's worker thread, so tests see the webgpu backend's selection, identity (status,
// metrics, hello) and refusals. FAKE_WEBGPU_FAIL=<message> makes every start fail with it, as
// a golden-vector mismatch or a missing adapter would.
import { workerExecutor } from "@vgpu-ha/gpu-model/worker";

export const FAKE_ADAPTER = {
  vendor: "fakevendor",
  architecture: "fakearch",
  device: "fake-gpu-1",
  description: "Fake GPU for tests",
  driver: "0.0.1",
  webgpu: "0.0.0-fake",
} as const;

/** The built module's path, for testing.webgpuModule. */
export const FAKE_WEBGPU_MODULE = new URL("./fake-webgpu.js", import.meta.url).href.replace(
  "/test/support/",
  "/test/dist/support/",
);

export async function createWebGpuExecutor(options: { maxCallMs: number }) {
  const failure = process.env.FAKE_WEBGPU_FAIL;
  if (failure !== undefined && failure !== "") throw new Error(failure);
  return { executor: workerExecutor({ maxCallMs: options.maxCallMs })(), adapter: FAKE_ADAPTER };
}

/** As the real package's (bench/gpu.ts drives the executor with it). */
export { ExecutorDriver } from "@vgpu-ha/gpu-webgpu";
