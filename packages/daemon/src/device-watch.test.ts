// Proves the node's device watch reports the first failure of the device it follows, once; a
// device already failed when handed over is reported at once; a device replaced by a role
// change is no longer followed; a failure a role reports itself (report) counts once with the
// watch's own. A hand-driven DeviceProgress stands in for the device thread.
import type { DeviceFailure, DeviceProgress } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { DeviceWatch } from "./device-watch.js";

class FakeProgress implements DeviceProgress {
  failure: DeviceFailure | undefined;
  private readonly listeners = new Set<(f: DeviceFailure) => void>();
  beginSeq(): void {}
  doneSeq(lastSeq: number): number {
    return lastSeq;
  }
  onProgress(): () => void {
    return () => {};
  }
  afterDevice(callback: () => void): void {
    callback();
  }
  onFailure(listener: (f: DeviceFailure) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  fail(failure: DeviceFailure): void {
    this.failure = failure;
    for (const l of [...this.listeners]) l(failure);
  }
  get listening(): number {
    return this.listeners.size;
  }
}

const hung: DeviceFailure = { reason: "work past device.maxCallMs (50 ms)", seq: 12 };

describe("DeviceWatch", () => {
  it("reports the followed device's failure once", () => {
    const seen: DeviceFailure[] = [];
    const watch = new DeviceWatch((f) => seen.push(f));
    const device = new FakeProgress();
    watch.watch(device);
    watch.watch(device); // the same device again: one subscription
    expect(device.listening).toBe(1);
    device.fail(hung);
    device.fail({ reason: "again", seq: 13 });
    expect(seen).toEqual([hung]);
    expect(watch.failure).toEqual(hung);
    expect(device.listening).toBe(0);
  });

  it("reports at once a device that had failed before it was handed over", () => {
    const seen: DeviceFailure[] = [];
    const device = new FakeProgress();
    device.fail(hung);
    new DeviceWatch((f) => seen.push(f)).watch(device);
    expect(seen).toEqual([hung]);
  });

  it("stops following a device a role change left behind", () => {
    const seen: DeviceFailure[] = [];
    const watch = new DeviceWatch((f) => seen.push(f));
    const old = new FakeProgress();
    const current = new FakeProgress();
    watch.watch(old);
    watch.watch(current);
    expect(old.listening).toBe(0);
    old.fail({ reason: "dropped replica", seq: 1 });
    expect(seen).toEqual([]);
    current.fail(hung);
    expect(seen).toEqual([hung]);
  });

  it("a failure a role reports (the standby's driver) is the same once-only report", () => {
    const seen: DeviceFailure[] = [];
    const watch = new DeviceWatch((f) => seen.push(f));
    const device = new FakeProgress();
    watch.watch(device);
    watch.report(hung);
    device.fail(hung); // the watch's own report of it comes second: nothing more
    watch.report({ reason: "another", seq: 1 });
    expect(seen).toEqual([hung]);
    expect(watch.failure).toEqual(hung);
  });
});
