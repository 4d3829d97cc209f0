// The shape of `@vgpu-ha/gpu-webgpu` as the daemon uses it. The daemon never imports that
// package statically: it loads it with a dynamic import() only when device.backend is webgpu,
// so a host without a GPU never loads Dawn (the npm `webgpu` package's dawn.node).
import type { DeviceExecutor } from "@vgpu-ha/gpu-model";

/** The GPU adapter a WebGPU executor runs on, as Dawn names it (docs/gpu.md). */
export interface AdapterIdentity {
  readonly vendor: string;
  readonly architecture: string;
  readonly device: string;
  readonly description: string;
  /** The driver's version, where the adapter exposes it. */
  readonly driver?: string | undefined;
  /** Dawn's backend (vulkan …), where the adapter says. */
  readonly backend?: string | undefined;
  /** The npm `webgpu` (Dawn) package version. */
  readonly webgpu: string;
}

/** What createWebGpuExecutor is asked for. */
export interface WebGpuExecutorOptions {
  /** Dawn flags for its create(), e.g. backend=vulkan (device.webgpu.dawnFlags). */
  readonly dawnFlags: readonly string[];
  /** The longest µs between Dawn's event polls (device.webgpu.eventIntervalUs). */
  readonly eventIntervalUs?: number;
}

export interface WebGpuModule {
  /**
   * Opens the adapter, compiles the pipelines and runs the golden vectors; rejects, naming the
   * kernel, when a result differs from the model's, or when there is no adapter.
   */
  createWebGpuExecutor(options: WebGpuExecutorOptions): Promise<{
    executor: DeviceExecutor;
    adapter: AdapterIdentity;
    /** The largest buffer object the device holds, in bytes. */
    maxBufferBytes?: number;
  }>;
}

/** The package the webgpu backend lives in. */
export const WEBGPU_PACKAGE = "@vgpu-ha/gpu-webgpu";

/** Loads the webgpu backend's module (a package name, or a file URL: testing.webgpuModule). */
export async function importWebGpu(specifier: string = WEBGPU_PACKAGE): Promise<WebGpuModule> {
  const mod = (await import(specifier)) as Partial<WebGpuModule>;
  if (typeof mod.createWebGpuExecutor !== "function") {
    throw new Error(`${specifier} does not export createWebGpuExecutor`);
  }
  return mod as WebGpuModule;
}

/** "nvidia nvidia-h100-80gb-hbm3 (hopper, driver 580.159.04, vulkan, webgpu 0.6.2)": for people. */
export function describeAdapter(a: AdapterIdentity): string {
  const details = [
    a.architecture,
    a.driver !== undefined && a.driver !== "" ? `driver ${a.driver}` : undefined,
    a.backend,
    `webgpu ${a.webgpu}`,
  ].filter((d): d is string => d !== undefined && d !== "");
  return `${a.vendor} ${a.device || a.description} (${details.join(", ")})`;
}
