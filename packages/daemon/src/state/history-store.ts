// The node's history of role changes (`vgpuctl history`): one JSON line per change, appended
// and fsynced beside the epoch file, never rewritten. A line torn by a crash mid-append is
// skipped on read. Role changes are rare (a few hundred bytes each), so the file is not
// rotated; reads return the newest HISTORY_READ_MAX entries.
import { join } from "node:path";
import type { RoleChange } from "@vgpu-ha/common";
import { appendDurably, readOrUndefined } from "./durable-file.js";

export type { RoleChange };

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
