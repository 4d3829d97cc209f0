// The report of a run: report.json (everything a script needs), report.md (a table a person
// reads in half a minute) and history.jsonl (every frame's outcome, for investigating).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Counts, percentiles, Verdict } from "./checker.js";
import type { SessionHistory } from "./history.js";
import type { FaultRecord, PlannedFault } from "./nemesis.js";
import type { StepDown } from "./node-logs.js";
import type { ChaosOptions } from "./options.js";

export interface Report {
  readonly ok: boolean;
  readonly parameters: ChaosOptions & { readonly hosts: string; readonly replay: string };
  readonly startedAt: string;
  readonly elapsedS: number;
  readonly plan: readonly PlannedFault[];
  readonly faults: readonly {
    index: number;
    kind: string;
    description: string;
    target?: string;
    targetRole?: string;
    applied?: string;
    atS?: number;
    endS?: number;
    failoverMs?: number;
    newPrimary?: string;
    epochBefore?: number;
    newEpoch?: number;
    recoveredS?: number;
    maxAckGapMs?: number;
    skipped?: string;
    errors: string[];
  }[];
  readonly faultCounts: Record<string, number>;
  readonly failoverMs: ReturnType<typeof percentiles> | null;
  /** The same per kind of fault (kill, pause; partitions that led to one too). */
  readonly failoverMsByKind: Record<string, ReturnType<typeof percentiles>>;
  readonly counts: Counts;
  readonly verdicts: readonly Verdict[];
  readonly stepDowns: readonly StepDown[];
  readonly sessions: readonly {
    id: string;
    slot: number;
    seed: number;
    frames: number;
    acknowledged: number;
    failure?: string;
    counterRead?: number;
  }[];
  readonly notes: readonly string[];
}

export function faultSummaries(
  records: readonly FaultRecord[],
  gapOf: (r: FaultRecord) => number | undefined,
) {
  const s = (ms: number | undefined) => (ms === undefined ? undefined : Math.round(ms) / 1000);
  return records.map((r) => ({
    index: r.plan.index,
    kind: r.plan.kind,
    description: r.description,
    ...(r.target === undefined ? {} : { target: r.target }),
    ...(r.targetRole === undefined ? {} : { targetRole: r.targetRole }),
    ...(r.applied === undefined ? {} : { applied: r.applied }),
    ...(r.startMs === undefined ? {} : { atS: s(r.startMs) }),
    ...(r.endMs === undefined ? {} : { endS: s(r.endMs) }),
    ...(r.failoverMs === undefined ? {} : { failoverMs: Math.round(r.failoverMs) }),
    ...(r.newPrimary === undefined ? {} : { newPrimary: r.newPrimary }),
    ...(r.epochBefore === undefined ? {} : { epochBefore: r.epochBefore }),
    ...(r.newEpoch === undefined ? {} : { newEpoch: r.newEpoch }),
    ...(r.recoveredMs === undefined ? {} : { recoveredS: s(r.recoveredMs) }),
    ...(gapOf(r) === undefined ? {} : { maxAckGapMs: Math.round(gapOf(r)!) }),
    ...(r.skipped === undefined ? {} : { skipped: r.skipped }),
    errors: r.errors,
  }));
}

export function sessionSummaries(sessions: readonly SessionHistory[]): Report["sessions"] {
  return sessions.map((s) => ({
    id: s.id,
    slot: s.slot,
    seed: s.seed,
    frames: s.frames.length,
    acknowledged: s.frames.filter((f) => f.outcome === "ok").length,
    ...(s.failure ? { failure: s.failure.message } : {}),
    ...(s.counterRead === undefined ? {} : { counterRead: s.counterRead }),
  }));
}

const ms = (v: number | undefined) => (v === undefined ? "–" : `${Math.round(v)}`);

export function markdown(r: Report): string {
  const p = r.parameters;
  const c = r.counts;
  const f = r.failoverMs;
  const lines: string[] = [];
  lines.push(`# Chaos run: ${r.ok ? "PASS" : "FAIL"}`, "");
  lines.push("| | |", "|---|---|");
  lines.push(
    `| verdict | **${r.ok ? "PASS" : "FAIL"}** (${r.verdicts.filter((v) => v.ok).length}/${r.verdicts.length} checks hold) |`,
  );
  lines.push(
    `| run | ${p.mode} replication, ${p.lease} lease, ${p.durationS} s of faults (${r.elapsedS.toFixed(0)} s in all), seed ${p.seed}, ${p.sessions} sessions at ${p.rate} frames/s |`,
  );
  lines.push(`| hosts | ${p.hosts} |`);
  lines.push(
    `| faults injected | ${
      Object.entries(r.faultCounts)
        .map(([k, n]) => `${k} ${n}`)
        .join(", ") || "none"
    } |`,
  );
  const byKind = Object.entries(r.failoverMsByKind)
    .map(([k, v]) => (v ? `${k} p50 ${v.p50} / p99 ${v.p99} / max ${v.max} ms (${v.n})` : ""))
    .filter((x) => x !== "")
    .join("; ");
  lines.push(
    `| failover (fault → first ack on the new primary) | ${f ? `p50 ${f.p50} ms, p99 ${f.p99} ms, max ${f.max} ms (${f.n} kills and pauses)` : "no failover"}${byKind ? `; by fault: ${byKind}` : ""} |`,
  );
  lines.push(
    `| frames acknowledged | ${c.framesAcknowledged} of ${c.framesSent} sent (${c.incrementsAcknowledged} increments) |`,
  );
  lines.push(
    `| frames lost | ${c.lost}${c.lostExcused > 0 ? ` (${c.lostExcused} excused: reported split-brain discards or async losses)` : ""} |`,
  );
  lines.push(`| frames duplicated | ${c.duplicated} |`);
  lines.push(`| sessions failed | ${c.sessionsFailed} |`);
  lines.push(
    `| discarded by step-downs (split brain) | ${c.splitBrainReported.stepDowns} step-downs discarding ${c.splitBrainReported.acknowledgedFrames} acknowledged frames, ${c.splitBrainReported.frames} frames, ${c.splitBrainReported.sessions} sessions |`,
  );
  lines.push(`| replay | \`${p.replay}\` |`, "");
  lines.push("## Checks", "", "| check | | detail |", "|---|---|---|");
  for (const v of r.verdicts)
    lines.push(`| ${v.name} | ${v.ok ? "✓" : "**✗**"} | ${v.detail.replace(/\|/g, "\\|")} |`);
  lines.push(
    "",
    "## Faults",
    "",
    "| # | at s | fault | target | failover ms | new epoch | max ack gap ms | healthy again at s |",
    "|---|---|---|---|---|---|---|---|",
  );
  for (const x of r.faults) {
    lines.push(
      `| ${x.index} | ${x.atS ?? "–"} | ${x.skipped ? `${x.kind}: skipped (${x.skipped})` : (x.applied ?? x.description)} | ${x.target ? `${x.target} (${x.targetRole})` : "–"} | ${ms(x.failoverMs)} | ${x.newEpoch ?? "–"} | ${ms(x.maxAckGapMs)} | ${x.recoveredS ?? "–"} |`,
    );
  }
  if (r.notes.length > 0) lines.push("", "## Notes", "", ...r.notes.map((n) => `- ${n}`));
  lines.push(
    "",
    "Timeline: [timeline.svg](timeline.svg). Every frame: history.jsonl; every status poll: status.jsonl; node logs: nodes/.",
    "",
  );
  return lines.join("\n");
}

export function writeReport(
  dir: string,
  report: Report,
  sessions: readonly SessionHistory[],
): void {
  writeFileSync(join(dir, "report.json"), `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(join(dir, "report.md"), markdown(report));
  const lines: string[] = [];
  for (const s of sessions) {
    for (const f of s.frames) {
      lines.push(
        JSON.stringify({
          session: s.id,
          n: f.number,
          kind: f.kind,
          invokedMs: Math.round(f.invokedMs),
          outcome: f.outcome,
          ...(f.settledMs === undefined ? {} : { settledMs: Math.round(f.settledMs) }),
          ...(f.result ? { code: f.result.code } : {}),
          ...(f.nodeId ? { node: f.nodeId, epoch: f.epoch } : {}),
          ...(f.error ? { error: f.error } : {}),
        }),
      );
    }
  }
  writeFileSync(join(dir, "history.jsonl"), `${lines.join("\n")}\n`);
}
