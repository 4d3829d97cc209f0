// The node's history of role changes (`vgpuctl history`): one JSON line per change, appended
// and fsynced beside the epoch file, never rewritten. A line torn by a crash mid-append is
// skipped on read. Role changes are rare (a few hundred bytes each), so the file is not
// rotated; reads return the newest HISTORY_READ_MAX entries.
import { join } from "node:path";
import { appendDurably, readOrUndefined } from "./durable-file.js";

export interface RoleChange {
  /** Wall-clock time of the change (ISO 8601). */
  readonly at: string;
  readonly node: string;
  /** The epoch the node holds after the change. */
  readonly epoch: number;
  /** The role before: "none" at process start. */
  readonly from: string;
  readonly to: string;
  /** cold_start, start, lease_expired, switchover, manual, higher_epoch, reinit, … */
  readonly reason: string;
  /** The last seq the node's state held at the change. */
  readonly seq: number;
  /** Who asked: "operator <remote address>", "peer" (a handover) or "automatic". */
  readonly by: string;
}

export const HISTORY_FILE = "history.jsonl";
export const HISTORY_READ_MAX = 1000;

export class HistoryStore {
  private readonly dir: string;

  constructor(stateDir: string) {
    this.dir = stateDir;
  }

  append(change: RoleChange): void {
    appendDurably(this.dir, HISTORY_FILE, `${JSON.stringify(change)}\n`);
  }

  /** The newest `max` changes, oldest first. */
  read(max = HISTORY_READ_MAX): RoleChange[] {
    const text = readOrUndefined(join(this.dir, HISTORY_FILE)) ?? "";
    const changes: RoleChange[] = [];
    for (const line of text.split("\n")) {
      const change = parseLine(line);
      if (change) changes.push(change);
    }
    return changes.slice(-max);
  }
}

function parseLine(line: string): RoleChange | undefined {
  if (line.trim() === "") return undefined;
  try {
    const v = JSON.parse(line) as Partial<RoleChange>;
    return typeof v.at === "string" && typeof v.to === "string" ? (v as RoleChange) : undefined;
  } catch {
    return undefined; // torn by a crash mid-append
  }
}
