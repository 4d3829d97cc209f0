// Which device a node runs (device.backend), decided once at start: the CPU model (on its own
// thread or inline, device.thread), or a GPU through WebGPU. The webgpu backend's package is
// loaded with a dynamic import() only here and only for `webgpu`, so a host without a GPU never
// loads Dawn. Its start opens the adapter and runs the golden vectors; when that fails the node
// refuses to start (vgpud exit 2, naming the kernel) or, with device.webgpu.onFailure: model,
// runs the model and says why. The setup also says what the node announces about its device:
// the kernel contract version (replication hello, status, metrics) and the adapter.
import { type Config, seqTraceOn, traceSeq } from "@vgpu-ha/common";
import {
  type DeviceExecutor,
  type ExecutorFactory,
  KERNEL_CONTRACT_VERSION,
  traceDeviceQueues,
} from "@vgpu-ha/gpu-model";
import { workerExecutor } from "@vgpu-ha/gpu-model/worker";
import { DeferredExecutor } from "./deferred-executor.js";
import {
  type AdapterIdentity,
  describeAdapter,
  importWebGpu,
  WEBGPU_PACKAGE,
  type WebGpuExecutorOptions,
  type WebGpuModule,
} from "./webgpu-module.js";

export type DeviceBackend = "model" | "webgpu";

export interface DeviceSetup {
  /** What runs the device's work now (model after a webgpu fallback). */
  readonly backend: DeviceBackend;
  /** The kernel contract the device implements (testing.kernelContractVersion overrides it). */
  readonly kernelContract: number;
  /** The GPU adapter (webgpu only). */
  readonly adapter?: AdapterIdentity;
  /** What the device is, for people and the hello: "model" or "webgpu nvidia …". */
  readonly description: string;
  /** Why webgpu was configured but the model runs (device.webgpu.onFailure: model). */
  readonly fallbackReason?: string;
  /** The executor of each new backend's device (undefined: inline on the event loop). */
  readonly executor: ExecutorFactory | undefined;
  /** Ends the device started ahead that no backend took (the node stops). */
  readonly close?: () => void;
}

/** The webgpu backend could not start and the config says to stop (vgpud exit 2). */
export class DeviceStartError extends Error {}

export interface DeviceSetupDeps {
  /** Loads the webgpu backend's module (tests pass a fake; the model never calls it). */
  readonly load?: (specifier: string) => Promise<WebGpuModule>;
  readonly warn: (fields: Record<string, unknown>, message: string) => void;
}

/**
 * The kernel contract of this build's model (docs/gpu-model.md, "Kernel contract"); the webgpu
 * backend implements the same one, which its golden vectors check at start.
 */
export function modelKernelContract(): number {
  return KERNEL_CONTRACT_VERSION;
}

function kernelContract(config: Config): number {
  return config.testing.kernelContractVersion ?? modelKernelContract();
}

/** The CPU model's executors, as device.thread says. */
export function modelExecutor(config: Config): ExecutorFactory | undefined {
  return config.device.thread === "worker"
    ? workerExecutor({
        maxCallMs: config.device.maxCallMs,
        kernelDelayMs: config.testing.kernelDelayMs,
        ...(config.testing.kernelDelayOnly !== undefined
          ? { kernelDelayOnly: config.testing.kernelDelayOnly }
          : {}),
      })
    : undefined;
}

function modelSetup(config: Config, fallbackReason?: string): DeviceSetup {
  const factory = modelExecutor(config);
  const started = factory && firstStartedNow(factory);
  return {
    backend: "model",
    kernelContract: kernelContract(config),
    description: "model",
    ...(fallbackReason !== undefined ? { fallbackReason } : {}),
    executor: started,
    ...(started ? { close: () => started.close() } : {}),
  };
}

/**
 * Executors of `factory`, the first of them made now: a device thread loads its code for
 * 0.1-0.2 s before it runs anything (measured on the shared 2-core box), and a fresh standby's
 * first backend is made by its first snapshot's chunk 0, whose pages then waited for that
 * thread, which also took CPU from the start of the pull. Made with the node, it has started
 * by then; later backends (a snapshot replacing a replica) start theirs as before.
 */
export function firstStartedNow(factory: ExecutorFactory): ExecutorFactory & { close(): void } {
  let spare: DeviceExecutor | undefined = factory();
  const next = () => {
    const executor = spare ?? factory();
    spare = undefined;
    return executor;
  };
  // Closing ends the spare only: an executor handed out is its backend's to close.
  return Object.assign(next, {
    close: () => {
      spare?.close();
      spare = undefined;
    },
  });
}

export async function setUpDevice(config: Config, deps: DeviceSetupDeps): Promise<DeviceSetup> {
  if (seqTraceOn) traceDeviceQueues(traceSeq);
  if (config.device.backend === "model") return modelSetup(config);
  const options: WebGpuExecutorOptions = {
    dawnFlags: config.device.webgpu.dawnFlags,
    eventIntervalUs: config.device.webgpu.eventIntervalUs,
  };
  const specifier = config.testing.webgpuModule ?? WEBGPU_PACKAGE;
  let gpu: WebGpuModule;
  let first: Awaited<ReturnType<WebGpuModule["createWebGpuExecutor"]>>;
  try {
    gpu = await (deps.load ?? importWebGpu)(specifier);
    first = await gpu.createWebGpuExecutor(options);
    const max = first.maxBufferBytes;
    if (max !== undefined && max < config.device.maxBoBytes) {
      first.executor.close();
      throw new Error(
        `the GPU holds buffers of at most ${max} bytes, below device.maxBoBytes ` +
          `(${config.device.maxBoBytes}): lower device.maxBoBytes`,
      );
    }
  } catch (e) {
    const reason = `device.backend webgpu did not start: ${(e as Error)?.message ?? String(e)}`;
    if (config.device.webgpu.onFailure === "model") {
      deps.warn({ reason }, "the webgpu backend did not start: running the CPU model instead");
      return modelSetup(config, reason);
    }
    throw new DeviceStartError(reason);
  }
  // The device checked at start serves the first backend; a later one (a new replica, a
  // snapshot installed) opens its own, golden vectors included, and holds its work meanwhile.
  let spare: DeviceExecutor | undefined = first.executor;
  return {
    backend: "webgpu",
    kernelContract: kernelContract(config),
    adapter: first.adapter,
    description: `webgpu ${describeAdapter(first.adapter)}`,
    executor: () => {
      const executor = spare;
      spare = undefined;
      return (
        executor ?? new DeferredExecutor(gpu.createWebGpuExecutor(options).then((r) => r.executor))
      );
    },
  };
}

/** The device as /v1/status shows it (before start: the configured backend, nothing opened). */
export function deviceStatus(
  device: DeviceSetup | undefined,
  config: Config,
): Record<string, unknown> {
  return {
    backend: device?.backend ?? config.device.backend,
    kernelContractVersion: device?.kernelContract ?? kernelContract(config),
    description: device?.description ?? null,
    adapter: device?.adapter ?? null,
    ...(device?.fallbackReason !== undefined ? { fallbackReason: device.fallbackReason } : {}),
  };
}
