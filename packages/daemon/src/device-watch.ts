// Follows the device of the role that runs now (a primary's backend, or the standby's replica
// once it has one) and reports, once, the first failure of that device (progress.onFailure:
// work past device.maxCallMs, or the device thread died). The node then steps down and exits
// (node.ts, deviceFailed). A device left behind by a role change is no longer watched.
import type { DeviceFailure, DeviceProgress } from "@vgpu-ha/gpu-model";

export class DeviceWatch {
  private watched: DeviceProgress | undefined;
  private unsubscribe: () => void = () => {};
  private readonly onFailed: (failure: DeviceFailure) => void;
  /** The failure reported, once there is one; nothing more is watched after it. */
  failure: DeviceFailure | undefined;

  constructor(onFailed: (failure: DeviceFailure) => void) {
    this.onFailed = onFailed;
  }

  /** Watches this device instead of the previous one (the same one again: nothing changes). */
  watch(progress: DeviceProgress): void {
    if (progress === this.watched || this.failure !== undefined) return;
    this.unsubscribe();
    this.watched = progress;
    if (progress.failure !== undefined) {
      this.failed(progress.failure);
      return;
    }
    this.unsubscribe = progress.onFailure((failure) => this.failed(failure));
  }

  /** A failure learnt another way (a role's own watch): reported unless one already was. */
  report(failure: DeviceFailure): void {
    this.failed(failure);
  }

  close(): void {
    this.unsubscribe();
    this.unsubscribe = () => {};
  }

  private failed(failure: DeviceFailure): void {
    if (this.failure !== undefined) return;
    this.failure = failure;
    this.close();
    this.onFailed(failure);
  }
}
