// Proves writePages' `returned` contract on a device held back by the test (ManualExecutor):
// an owned write's buffer is told back only once the device has run that write (never while it
// is queued, so a reused buffer cannot change bytes still to be written), each buffer once for
// writes that share it; writes not owned, or a device that fails first, tell nothing.
import { describe, expect, it } from "vitest";
import { Device, type DeviceOptions } from "./device.js";
import { ManualExecutor } from "./executor.js";

const options: DeviceOptions = {
  seed: 1,
  vramBytes: 1 << 20,
  maxBoBytes: 256 << 10,
  maxKernelWork: 1 << 20,
};

function deviceWithBuffer() {
  const executor = new ManualExecutor();
  const device = new Device(options, executor);
  const bo = device.allocBo(device.createContext(), 64 * 1024);
  if ("code" in bo) throw new Error(bo.message);
  executor.runAll();
  return { executor, device, id: bo.id };
}

describe("Device.writePages returned", () => {
  it("tells an owned write's buffer back only after the device ran it, once", () => {
    const { executor, device, id } = deviceWithBuffer();
    const receive = new ArrayBuffer(16 * 1024);
    new Uint8Array(receive).fill(7);
    const returned: ArrayBuffer[][] = [];
    device.writePages(
      [
        { id, at: 0, data: new Uint8Array(receive, 0, 8192) },
        { id, at: 32 * 1024, data: new Uint8Array(receive, 8192, 8192) },
      ],
      true,
      (b) => returned.push([...b]),
    );
    expect(executor.pending).toBe(1);
    expect(returned).toEqual([]); // queued: the device may still read it
    executor.run(1);
    expect(returned).toEqual([[receive]]); // both writes view it: told once
    const vram = executor.peek(id).bytes;
    expect(vram.subarray(0, 8192).every((x) => x === 7)).toBe(true);
    expect(vram.subarray(32 * 1024, 40 * 1024).every((x) => x === 7)).toBe(true);
    // The caller now reuses it: VRAM keeps what was written.
    new Uint8Array(receive).fill(9);
    expect(vram[0]).toBe(7);
  });

  it("tells nothing for writes not owned, nor when the device fails before running them", () => {
    const { executor, device, id } = deviceWithBuffer();
    const told: unknown[] = [];
    device.writePages([{ id, at: 0, data: new Uint8Array(4096) }], false, (b) => told.push(b));
    device.writePages([{ id, at: 0, data: new Uint8Array(4096) }], true, (b) => told.push(b));
    executor.fail("gone");
    expect(executor.runAll()).toBe(0);
    expect(told).toEqual([]);
  });
});
