// How the GPU tests reach an adapter: VGPU_WEBGPU_FLAGS (comma-separated Dawn flags, e.g.
// `backend=vulkan`) and VGPU_WEBGPU_COMPAT=1 (a compatibility adapter: Dawn's OpenGL ES
// backend on Mesa llvmpipe, a plumbing smoke test only, ../shared/GPU.md trap 5). Without an
// adapter openGpu() throws, so every GPU test fails: `npm run test:gpu` never skips.
import type { CreateWebGpuOptions } from "../create.js";

export function gpuOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): CreateWebGpuOptions {
  const flags = (env.VGPU_WEBGPU_FLAGS ?? "").split(",").filter((f) => f !== "");
  return { dawnFlags: flags, compatibility: env.VGPU_WEBGPU_COMPAT === "1" };
}
