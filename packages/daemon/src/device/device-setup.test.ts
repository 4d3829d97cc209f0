// Proves the selection of the device backend: `model` (the default) never loads the webgpu
// package; `webgpu` loads it, announces the adapter and the kernel contract, serves the first
// backend with the device checked at start and later ones with freshly opened devices; a
// backend that cannot start (no adapter, a golden vector naming its kernel) refuses the start
// (DeviceStartError: vgpud exit 2) or, with device.webgpu.onFailure: model, falls back saying why.
// The model on its thread starts its first device with the node (firstStartedNow): made at once,
// handed to the first backend, later ones made when asked; close() ends only one not handed out.
import { parseConfig } from "@vgpu-ha/common";
import { type DeviceExecutor, InlineExecutor } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { DeferredExecutor } from "./deferred-executor.js";
import {
  DeviceStartError,
  deviceStatus,
  firstStartedNow,
  modelKernelContract,
  setUpDevice,
} from "./device-setup.js";
import type { AdapterIdentity, WebGpuModule } from "./webgpu-module.js";

const ADAPTER: AdapterIdentity = {
  vendor: "nvidia",
  architecture: "hopper",
  device: "nvidia-h100-80gb-hbm3",
  description: "NVIDIA H100 80GB HBM3",
  driver: "580.159.04",
  webgpu: "0.6.2",
};

const config = (device: Record<string, unknown> = {}, testing: Record<string, unknown> = {}) =>
  parseConfig({ nodeId: "n", device, testing });

/** A stand-in webgpu module: each start gives a new inline executor, or fails as told. */
function fakeGpu(fail?: string) {
  const opened: DeviceExecutor[] = [];
  const mod: WebGpuModule = {
    async createWebGpuExecutor() {
      if (fail !== undefined) throw new Error(fail);
      const executor = new InlineExecutor();
      opened.push(executor);
      return { executor, adapter: ADAPTER };
    },
  };
  return { mod, opened };
}

const quiet = { warn: () => {} };

describe("setUpDevice", () => {
  it("model (the default) never loads the webgpu package", async () => {
    const loads: string[] = [];
    const device = await setUpDevice(config(), {
      ...quiet,
      load: async (s) => {
        loads.push(s);
        throw new Error("must not load");
      },
    });
    expect(loads).toEqual([]);
    expect(device).toMatchObject({ backend: "model", description: "model" });
    expect(device.kernelContract).toBe(modelKernelContract());
    expect(device.adapter).toBeUndefined();
    expect(typeof device.executor).toBe("function"); // device.thread: worker
    const inline = await setUpDevice(config({ thread: "inline" }), quiet);
    expect(inline.executor).toBeUndefined();
  });

  it("webgpu loads the package, announces the adapter and the model's contract", async () => {
    const gpu = fakeGpu();
    const loads: string[] = [];
    const device = await setUpDevice(config({ backend: "webgpu" }), {
      ...quiet,
      load: async (s) => {
        loads.push(s);
        return gpu.mod;
      },
    });
    expect(loads).toEqual(["@vgpu-ha/gpu-webgpu"]);
    expect(device.backend).toBe("webgpu");
    expect(device.adapter).toEqual(ADAPTER);
    expect(device.kernelContract).toBe(modelKernelContract());
    expect(device.description).toBe(
      "webgpu nvidia nvidia-h100-80gb-hbm3 (hopper, driver 580.159.04, webgpu 0.6.2)",
    );
    expect(deviceStatus(device, config({ backend: "webgpu" }))).toMatchObject({
      backend: "webgpu",
      adapter: ADAPTER,
      kernelContractVersion: device.kernelContract,
    });
  });

  it("the first backend gets the device checked at start, later ones open their own", async () => {
    const gpu = fakeGpu();
    const device = await setUpDevice(config({ backend: "webgpu" }), {
      ...quiet,
      load: async () => gpu.mod,
    });
    expect(gpu.opened).toHaveLength(1);
    expect(device.executor!()).toBe(gpu.opened[0]);
    const second = device.executor!();
    expect(second).toBeInstanceOf(DeferredExecutor);
    await Promise.resolve();
    expect(gpu.opened).toHaveLength(2);
  });

  it("a golden-vector failure refuses the start, naming the kernel", async () => {
    const gpu = fakeGpu("golden vector reduce_sum_f32 n=2049: hash differs from the model's");
    const start = setUpDevice(config({ backend: "webgpu" }), {
      ...quiet,
      load: async () => gpu.mod,
    });
    await expect(start).rejects.toBeInstanceOf(DeviceStartError);
    await expect(start).rejects.toThrow(/device.backend webgpu did not start: .*reduce_sum_f32/);
  });

  it("a GPU whose buffers cannot hold device.maxBoBytes refuses the start", async () => {
    const closed: boolean[] = [];
    const mod: WebGpuModule = {
      async createWebGpuExecutor() {
        const executor = new InlineExecutor();
        executor.close = () => closed.push(true);
        return { executor, adapter: ADAPTER, maxBufferBytes: 2 ** 20 };
      },
    };
    const start = setUpDevice(config({ backend: "webgpu", maxBoBytes: "2MiB" }), {
      ...quiet,
      load: async () => mod,
    });
    await expect(start).rejects.toThrow(/at most 1048576 bytes, below device.maxBoBytes/);
    expect(closed).toEqual([true]);
  });

  it("a missing package refuses the start too", async () => {
    const start = setUpDevice(config({ backend: "webgpu" }), {
      ...quiet,
      load: async () => {
        throw new Error("Cannot find package '@vgpu-ha/gpu-webgpu'");
      },
    });
    await expect(start).rejects.toThrow(DeviceStartError);
  });

  it("onFailure: model runs the model instead and says why", async () => {
    const gpu = fakeGpu("no WebGPU adapter");
    const warned: string[] = [];
    const cfg = config({ backend: "webgpu", webgpu: { onFailure: "model" } });
    const device = await setUpDevice(cfg, {
      warn: (f) => warned.push(String(f.reason)),
      load: async () => gpu.mod,
    });
    expect(device.backend).toBe("model");
    expect(device.fallbackReason).toContain("no WebGPU adapter");
    expect(warned).toEqual([device.fallbackReason]);
    expect(deviceStatus(device, cfg)).toMatchObject({ fallbackReason: device.fallbackReason });
  });

  it("testing.kernelContractVersion overrides the announced contract", async () => {
    const device = await setUpDevice(config({}, { kernelContractVersion: 9 }), quiet);
    expect(device.kernelContract).toBe(9);
  });

  it("the model on its thread has its first device started with the node", async () => {
    const device = await setUpDevice(config({ thread: "worker" }), quiet);
    expect(device.executor).toBeDefined();
    expect(device.close).toBeDefined();
    device.close?.(); // the spare's thread ends
    const inline = await setUpDevice(config({ thread: "inline" }), quiet);
    expect(inline.executor).toBeUndefined();
  });
});

describe("firstStartedNow", () => {
  class Counted extends InlineExecutor {
    closed = false;
    override close(): void {
      this.closed = true;
      super.close();
    }
  }

  /** firstStartedNow over a factory that records what it made. */
  function counted() {
    const made: Counted[] = [];
    const factory = firstStartedNow(() => {
      const e = new Counted();
      made.push(e);
      return e;
    });
    return { made, factory };
  }

  it("makes the first executor at once, hands it out first, then makes one per ask", () => {
    const { made, factory } = counted();
    expect(made).toHaveLength(1); // started before any backend asked
    expect(factory()).toBe(made[0]);
    expect(made).toHaveLength(1);
    expect(factory()).toBe(made[1]);
    factory.close(); // nothing spare: the handed-out ones are their backends' to close
    expect(made.map((e) => e.closed)).toEqual([false, false]);
  });

  it("close() ends a first executor no backend took", () => {
    const { made, factory } = counted();
    factory.close();
    expect(made[0]!.closed).toBe(true);
    expect(factory()).toBe(made[1]); // asked later: a new one
  });
});
