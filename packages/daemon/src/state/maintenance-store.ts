// Maintenance mode (`vgpuctl pause`), persisted in the state directory so that a restarted
// node stays paused: no file means not paused.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { readOrUndefined, replaceDurably } from "./durable-file.js";

export interface Maintenance {
  /** Wall-clock ms when the pause began. */
  readonly sinceMs: number;
  /** Who paused it ("operator <address>", or "primary" when adopted from its heartbeats). */
  readonly by: string;
}

const FILE = "maintenance";

export class MaintenanceStore {
  private readonly dir: string;

  constructor(stateDir: string) {
    this.dir = stateDir;
  }

  read(): Maintenance | undefined {
    const text = readOrUndefined(join(this.dir, FILE));
    if (text === undefined) return undefined;
    const v = JSON.parse(text) as Partial<Maintenance>;
    if (typeof v.sinceMs !== "number" || typeof v.by !== "string") {
      throw new Error(`${join(this.dir, FILE)} holds ${text.trim()}, not a maintenance record`);
    }
    return { sinceMs: v.sinceMs, by: v.by };
  }

  write(m: Maintenance | undefined): void {
    if (m === undefined) rmSync(join(this.dir, FILE), { force: true });
    else replaceDurably(this.dir, FILE, `${JSON.stringify(m)}\n`);
  }
}
