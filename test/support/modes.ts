// The replication modes (replication.mode) the real-process tests and the chaos harness run
// in: every mode the config accepts (issue #14). Which tests run in which is said in each test
// file's first lines.
import { REPLICATION_MODES, type ReplicationMode } from "@vgpu-ha/common";

/** async: replies at once; sync: once the standby received the entry; sync-applied: applied. */
export const MODES: readonly ReplicationMode[] = REPLICATION_MODES;

export type Mode = ReplicationMode;

/** Whether an acknowledged frame survives the loss of the primary in this mode. */
export const keepsAcknowledged = (mode: Mode) => mode !== "async";
