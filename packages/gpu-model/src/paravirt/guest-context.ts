// The guest-handle table's entries (backend.ts): a guest context, owned by one session of one
// tenant and mapping to a device context, and its buffers by guest handle.
import type { BufferObject } from "../device/buffer-object.js";
import type { DeviceContext } from "../device/device.js";
import type { TrackedBuffer } from "./mmio-tracker.js";

export interface GuestBo extends TrackedBuffer {
  readonly bo: BufferObject;
}

export class GuestContext {
  readonly handle: number;
  readonly tenant: string;
  readonly sessionId: string;
  readonly device: DeviceContext;
  readonly bos = new Map<number, GuestBo>();
  nextBoHandle = 1;
  fenceValue = 0;

  constructor(handle: number, tenant: string, sessionId: string, device: DeviceContext) {
    this.handle = handle;
    this.tenant = tenant;
    this.sessionId = sessionId;
    this.device = device;
  }
}
