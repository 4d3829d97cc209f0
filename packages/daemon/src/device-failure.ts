// What a node does when its device fails (device-watch.ts reports it): the device completes
// nothing more, so the node can serve no one. It says so (an error log line, the
// vgpu_device_failed gauge and vgpu_device_failures_total{whose="own"}, status.device); a
// primary names the frame whose device work was running to its standby (a DeviceFault, so the
// next primary never runs it again); then the node stops as on SIGTERM — guests are told
// NOT_PRIMARY, the lease thread stops renewing (peer mode: the standby takes over when the
// lease runs out; etcd mode: the leader key is released at once) — and vgpud exits with
// VgpudExit.deviceFailed (3). systemd restarts it; it comes back as a standby with a fresh
// device and resyncs from the new primary by snapshot. docs/operations.md, "A device that fails".
import type { FaultedFrame, Logger, NodeMetrics } from "@vgpu-ha/common";
import type { DeviceFailure } from "@vgpu-ha/gpu-model";
import type { Role } from "./roles/role.js";

/** How long a primary waits for its DeviceFault to leave before it stops anyway. */
export const FAULT_NOTICE_WAIT_MS = 1000;
/** How long stopping may take: stopping waits on nothing of the device, but bound it anyway. */
export const DEVICE_STOP_WAIT_MS = 5000;
const NOTICE_POLL_MS = 5;

export interface DeviceFailureDeps {
  readonly log: () => Logger;
  readonly metrics: NodeMetrics;
  readonly role: () => Role;
  /** The node's orderly stop (as on SIGTERM). */
  readonly stop: () => Promise<void>;
}

/** A primary role as far as the device failure needs it (PrimaryRole). */
interface FaultingPrimary {
  deviceFailed(failure: DeviceFailure): { frames: readonly FaultedFrame[]; sent: () => boolean };
}

function isFaultingPrimary(role: Role): role is Role & FaultingPrimary {
  return typeof (role as Partial<FaultingPrimary>).deviceFailed === "function";
}

/** Reports the failure, tells the standby, stops the node; resolves once it has stopped. */
export async function stepDownForDevice(
  deps: DeviceFailureDeps,
  failure: DeviceFailure,
  waits = { noticeMs: FAULT_NOTICE_WAIT_MS, stopMs: DEVICE_STOP_WAIT_MS },
): Promise<void> {
  deps.metrics.deviceFailed.set(1);
  deps.metrics.deviceFailures.inc({ whose: "own" });
  const role = deps.role();
  const notice = isFaultingPrimary(role) ? role.deviceFailed(failure) : undefined;
  const frames = (notice?.frames ?? []).map((f) => `${f.sessionId}#${f.frame} (seq ${f.seq})`);
  deps
    .log()
    .error(
      { reason: failure.reason, seq: failure.seq, role: role.name, inFlight: frames },
      "device failed: stepping down; the node exits (code 3) and restarts as a standby",
    );
  if (notice) await until(notice.sent, waits.noticeMs);
  await Promise.race([deps.stop(), delay(waits.stopMs)]);
}

async function until(done: () => boolean, limitMs: number): Promise<void> {
  const endMs = performance.now() + limitMs;
  while (!done() && performance.now() < endMs) await delay(NOTICE_POLL_MS);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
