// Makes a WebGPU device executor: loads Dawn (npm `webgpu`, pinned; only here, and only when
// called), asks for an adapter and a device with the adapter's buffer limits, compiles every
// pipeline once, then runs the golden vectors (golden.ts) and refuses the backend, naming the
// kernel, on any difference from the model. Returns the executor and the adapter's identity.
import { paceDawnEvents } from "./dawn-pacing.js";
import { WebGpuExecutor } from "./executor.js";
import { checkGoldenVectors, type GoldenReport } from "./golden.js";
import { compilePipelines, type GpuContext } from "./gpu-context.js";

/** The `webgpu` package this backend is built and checked against (../shared/GPU.md: pin it). */
export const WEBGPU_PACKAGE_VERSION = "0.6.2";

export interface AdapterIdentity {
  readonly vendor: string;
  readonly architecture: string;
  readonly device: string;
  readonly description: string;
  /** The driver, where the adapter says (Dawn puts it in `description` on some backends). */
  readonly driver: string | undefined;
  readonly backend: string | undefined;
  /** The npm `webgpu` (Dawn) package version. */
  readonly webgpu: string;
}

export interface CreateWebGpuOptions {
  /** Dawn flags for `create()`, e.g. `backend=vulkan` (default: none). */
  readonly dawnFlags?: readonly string[];
  /** Ask for a compatibility-mode adapter (Dawn's OpenGL ES backend: smoke tests only). */
  readonly compatibility?: boolean;
  /** Skip the golden vectors (tests of the executor itself; never a node). */
  readonly skipGolden?: boolean;
  /**
   * The longest interval between two of Dawn's event polls while GPU work is pending, in µs
   * (dawn-pacing.ts: a wait's polls start 10 µs apart and double up to it; default
   * DAWN_EVENT_INTERVAL_US); 0: every event-loop turn, as Dawn does.
   */
  readonly eventIntervalUs?: number;
}

/** The default of CreateWebGpuOptions.eventIntervalUs (device.webgpu.eventIntervalUs). */
export const DAWN_EVENT_INTERVAL_US = 200;

export interface WebGpuBackend {
  readonly executor: WebGpuExecutor;
  readonly adapter: AdapterIdentity;
  /** The largest buffer object this device holds, in bytes (compare device.maxBoBytes). */
  readonly maxBufferBytes: number;
  readonly golden: GoldenReport | undefined;
}

type DawnModule = { create(flags: string[]): GPU };

export async function openGpu(options: CreateWebGpuOptions = {}) {
  const { create } = (await import("webgpu")) as unknown as DawnModule;
  paceDawnEvents(options.eventIntervalUs ?? DAWN_EVENT_INTERVAL_US);
  const gpu = create([...(options.dawnFlags ?? [])]);
  const adapter = await gpu.requestAdapter(
    options.compatibility
      ? ({ featureLevel: "compatibility" } as GPURequestAdapterOptions)
      : undefined,
  );
  if (adapter === null) {
    throw new Error("webgpu: no GPU adapter (is libvulkan1 installed? see docs/gpu.md)");
  }
  const limits = adapter.limits;
  const device = await adapter.requestDevice({
    requiredLimits: {
      maxBufferSize: limits.maxBufferSize,
      maxStorageBufferBindingSize: limits.maxStorageBufferBindingSize,
      maxComputeWorkgroupsPerDimension: limits.maxComputeWorkgroupsPerDimension,
      maxComputeWorkgroupSizeX: limits.maxComputeWorkgroupSizeX,
      maxComputeWorkgroupSizeY: limits.maxComputeWorkgroupSizeY,
      maxComputeInvocationsPerWorkgroup: limits.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupStorageSize: limits.maxComputeWorkgroupStorageSize,
      maxStorageBuffersPerShaderStage: limits.maxStorageBuffersPerShaderStage,
    },
  });
  const maxBufferBytes = Math.min(limits.maxBufferSize, limits.maxStorageBufferBindingSize);
  const info = adapter.info;
  const identity: AdapterIdentity = {
    vendor: info.vendor,
    architecture: info.architecture,
    device: info.device,
    description: info.description,
    driver: (info as { driver?: string }).driver ?? /\d+\.\d+(\.\d+)?/.exec(info.description)?.[0],
    backend: (info as { backend?: string }).backend,
    webgpu: WEBGPU_PACKAGE_VERSION,
  };
  const context: GpuContext = {
    instance: gpu,
    device,
    pipelines: await compilePipelines(device),
    maxGroupsPerDimension: device.limits.maxComputeWorkgroupsPerDimension,
  };
  return { context, identity, maxBufferBytes };
}

export async function createWebGpuExecutor(
  options: CreateWebGpuOptions = {},
): Promise<WebGpuBackend> {
  const { context, identity, maxBufferBytes } = await openGpu(options);
  const executor = new WebGpuExecutor(context, { ownsDevice: true, maxBufferBytes });
  let golden: GoldenReport | undefined;
  if (!options.skipGolden) {
    try {
      golden = await checkGoldenVectors(executor);
    } catch (e) {
      executor.close();
      throw e;
    }
  }
  return { executor, adapter: identity, maxBufferBytes, golden };
}
