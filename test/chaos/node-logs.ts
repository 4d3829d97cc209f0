// What the nodes said about themselves in their logs (one file per process instance, so
// nothing is lost when a node is killed, unlike its metrics): each step-down of a primary that
// discarded its state, with what it discarded, and each promotion.
import { readFileSync } from "node:fs";
import type { Instance } from "./cluster.js";
import type { NodeName } from "./hosts.js";

export interface StepDown {
  readonly node: NodeName;
  readonly pid: number;
  /** Run time (ms) of the log line. */
  readonly atMs: number;
  /** The epoch in the line (the node's epoch after stepping down), and the higher one it met. */
  readonly epoch: number;
  readonly theirEpoch: number;
  readonly discarded: {
    readonly entries: number;
    readonly frames: number;
    readonly acknowledgedFrames: number;
    readonly sessions: number;
  };
  readonly message: string;
}

export interface NodeLogs {
  readonly stepDowns: StepDown[];
  /** Error and fatal lines (level ≥ 50), for the report's investigation notes. */
  readonly errors: { node: NodeName; pid: number; atMs: number; message: string }[];
}

/** `wallAtZero`: Date.now() when the run's clock read 0. */
export function readNodeLogs(instances: readonly Instance[], wallAtZero: number): NodeLogs {
  const stepDowns: StepDown[] = [];
  const errors: NodeLogs["errors"] = [];
  for (const inst of instances) {
    let text = "";
    try {
      text = readFileSync(inst.logFile, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n")) {
      if (!line.startsWith("{")) continue;
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      const msg = String(entry.msg ?? "");
      const time = entry.time;
      const atMs = (typeof time === "number" ? time : Date.parse(String(time))) - wallAtZero;
      if (msg.startsWith("stepping down to standby")) {
        const d = (entry.discarded ?? {}) as Record<string, number>;
        stepDowns.push({
          node: inst.node,
          pid: inst.pid,
          atMs,
          epoch: Number(entry.epoch ?? 0),
          theirEpoch: Number(entry.theirEpoch ?? 0),
          discarded: {
            entries: d.entries ?? 0,
            frames: d.frames ?? 0,
            acknowledgedFrames: d.acknowledgedFrames ?? 0,
            sessions: d.sessions ?? 0,
          },
          message: msg,
        });
      }
      if (Number(entry.level ?? 0) >= 50) {
        errors.push({ node: inst.node, pid: inst.pid, atMs, message: msg });
      }
    }
  }
  return { stepDowns, errors };
}
