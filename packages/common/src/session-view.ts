// A guest session as operators see it (GET /v1/sessions, `vgpuctl sessions`): the node builds
// it (packages/primary/src/session-list.ts), vgpuctl and the tests read it.

export interface SessionView {
  readonly tenant: string;
  readonly id: string;
  /** When this node opened it (ISO 8601); null when it was opened before this node served it. */
  readonly opened: string | null;
  /** The last frame number applied. */
  readonly lastFrame: number;
  /** A guest stream is attached now (always false on a standby: it serves no streams). */
  readonly attached: boolean;
  /** Since when no stream has been attached (ISO 8601; null while one is, and on a standby). */
  readonly idleSince: string | null;
  readonly idleSeconds: number | null;
  readonly contexts: number;
  readonly vramBytes: number;
}
