// What the executor needs of a WebGPU device: the device, its compiled pipelines and limits.
// Buffer usage and map-mode bits are the WebGPU constants, spelled out so that no module needs
// Dawn's globals installed.
import { SHADER_NAMES, type ShaderName, shaderSource } from "./wgsl/index.js";

export const Usage = {
  MAP_READ: 0x1,
  COPY_SRC: 0x4,
  COPY_DST: 0x8,
  UNIFORM: 0x40,
  STORAGE: 0x80,
} as const;

export const MAP_READ_MODE = 0x1;

export interface GpuContext {
  /**
   * Dawn's GPU object (`create()`'s result): held as long as the device is used. Once it is
   * garbage-collected, Dawn's instance goes and the process aborts at its next GPU call.
   */
  readonly instance: GPU;
  readonly device: GPUDevice;
  readonly pipelines: ReadonlyMap<ShaderName, GPUComputePipeline>;
  /** maxComputeWorkgroupsPerDimension. */
  readonly maxGroupsPerDimension: number;
}

/** Compiles every pipeline once (createComputePipelineAsync), naming the one that fails. */
export async function compilePipelines(
  device: GPUDevice,
): Promise<Map<ShaderName, GPUComputePipeline>> {
  const entries = await Promise.all(
    SHADER_NAMES.map(async (name) => {
      const module = device.createShaderModule({ label: name, code: shaderSource(name) });
      try {
        const pipeline = await device.createComputePipelineAsync({
          label: name,
          layout: "auto",
          compute: { module, entryPoint: "main" },
        });
        return [name, pipeline] as const;
      } catch (e) {
        const info = await module.getCompilationInfo();
        const messages = info.messages.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`);
        throw new Error(
          `webgpu: pipeline ${name} did not compile: ${(e as Error).message} ${messages.join("; ")}`,
        );
      }
    }),
  );
  return new Map(entries);
}
