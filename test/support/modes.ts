// The replication modes (replication.mode) the real-process tests and the chaos harness run
// in: every mode the config accepts (issue #14). Which tests run in which is said in each test
// file's first lines.
import { ConfigSchema, REPLICATION_MODES, type ReplicationMode } from "@vgpu-ha/common";

/** async: replies at once; sync: once the standby received the entry; sync-applied: applied. */
export const MODES: readonly ReplicationMode[] = REPLICATION_MODES;

export type Mode = ReplicationMode;

/** Whether an acknowledged frame survives the loss of the primary in this mode. */
export const keepsAcknowledged = (mode: Mode) => mode !== "async";

/**
 * The device settings the real-process pairs run with: the device on its own thread
 * (`device.thread: worker`) where this build's config has the setting, so the modes differ as
 * in production (a sync standby acknowledges receipt while its device applies later); nothing
 * where it has not (every node then runs its device inline).
 */
export const DEVICE_THREAD: Readonly<Record<string, unknown>> = ConfigSchema.shape.device.safeParse(
  { thread: "worker" },
).success
  ? { thread: "worker" }
  : {};
