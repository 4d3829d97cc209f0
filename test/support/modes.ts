// The replication modes (replication.mode) the real-process tests and the chaos harness run
// in, and what each promises a guest (issue #14): which tests run in which is said in each
// test file's first lines.
/** async: replies at once; sync: once the standby received the entry; sync-applied: applied. */
export const MODES = ["sync", "async"] as const;

export type Mode = (typeof MODES)[number];

/** Whether an acknowledged frame survives the loss of the primary in this mode. */
export const keepsAcknowledged = (mode: Mode) => mode !== "async";
