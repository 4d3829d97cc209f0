// The primary's log, instrumented for the simulator's checks.
import { type Entry, type EntryBody, ReplicationLog } from "@vgpu-ha/common";

/**
 * A log that also keeps every entry it ever appended (for the monitor), and which entry carries
 * each guest frame (to check sync replies against the truth, not the Sequencer's word).
 */
export class RecordingLog extends ReplicationLog {
  readonly all: Entry[] = [];
  readonly carriers = new Map<string, number>();

  override append(body: EntryBody, nowMs: number): Entry {
    const entry = super.append(body, nowMs);
    this.all.push(entry);
    if (body.kind === "call") this.carriers.set(frameKey(body.sessionId, body.frame), entry.seq);
    if (body.kind === "mmioPages" || body.kind === "mmioStore") {
      for (const f of body.frames) this.carriers.set(frameKey(f.sessionId, f.frame), entry.seq);
    }
    return entry;
  }
}

export const frameKey = (session: string, frame: number) => `${session}#${frame}`;
