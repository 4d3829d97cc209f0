// Sessions the pair ended without the guest asking (reaped when idle, or closed by an
// operator): kept, boundedly, on both nodes (each applies the same close entries), so a guest
// that resumes one later is told SESSION_EXPIRED and why, not UNKNOWN_SESSION. Not part of the
// state digest or of a snapshot: a standby resynced by snapshot knows only the ends after it.
import type { SessionCloseReason } from "@vgpu-ha/common/core";

export interface EndedSession {
  readonly tenant: string;
  readonly reason: Exclude<SessionCloseReason, "guest">;
}

/** Ended sessions remembered per node; the oldest are forgotten first (about 100 B each). */
export const ENDED_SESSIONS_KEPT = 4096;

export class EndedSessions {
  private readonly byId = new Map<string, EndedSession>();
  private readonly keep: number;

  constructor(keep = ENDED_SESSIONS_KEPT) {
    this.keep = keep;
  }

  get size(): number {
    return this.byId.size;
  }

  add(id: string, ended: EndedSession): void {
    this.byId.delete(id);
    this.byId.set(id, ended);
    for (const oldest of this.byId.keys()) {
      if (this.byId.size <= this.keep) break;
      this.byId.delete(oldest);
    }
  }

  get(id: string): EndedSession | undefined {
    return this.byId.get(id);
  }
}
