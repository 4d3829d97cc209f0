// report.json and report.md of a harness run: per attack the figures issue 12 asks for
// (epochChanges, guestRatio, lostAcked, peakRssMb, refusalsCounted), what the attacker saw, and
// every check that failed. The normal guest's throughput ratio is reported, never judged; a
// ratio under GUEST_RATIO_FLAG is marked in report.md for a person to look at.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AttackResult } from "./execute.js";

/** The ratio the hostile-tenant test used to assert; now only a mark in the report. */
export const GUEST_RATIO_FLAG = 0.8;

export interface HostileReport {
  readonly startedAt: string;
  readonly hosts: string;
  readonly scale: string;
  readonly notes: readonly string[];
  readonly attacks: readonly AttackResult[];
}

const fixed = (v: number | null, digits: number) => (v === null ? "–" : v.toFixed(digits));

export function markdown(r: HostileReport): string {
  const rows = r.attacks.map((a) => {
    const ratio =
      a.guestRatio === null
        ? "–"
        : `${a.guestRatio.toFixed(2)}${a.guestRatio < GUEST_RATIO_FLAG ? " ⚠" : ""}`;
    const refusals =
      a.refusalMetrics.length === 0 ? "(none to count)" : fixed(a.refusalsCounted, 0);
    return `| ${a.name} | ${a.at} | ${a.epochChanges} (want ${a.expectedEpochChanges}) | ${ratio} | ${a.lostAcked ?? "–"} | ${fixed(a.peakRssMb, 0)} | ${refusals} | ${a.failures.length === 0 ? "held" : "**FAILED**"} |`;
  });
  const details = r.attacks.map((a) =>
    [
      `### ${a.name}`,
      "",
      `- ${a.outcome?.note ?? "the attack tool did not finish"} (${a.durationS.toFixed(1)} s)`,
      `- sent ${JSON.stringify(a.outcome?.sent ?? {})}; answers ${JSON.stringify(a.outcome?.answers ?? {})}`,
      `- roles ${a.observation.rolesBefore.join(", ")} → ${a.observation.rolesAfter.join(", ")}; RSS before ${fixed(a.observation.rssBeforeMb, 0)} MiB; refusal log lines ${a.observation.refusalLogLines ?? "–"}`,
      ...(a.guest
        ? [
            `- normal guest: ${a.guest.callsPerSecondBefore.toFixed(0)} rounds/s before, ${a.guest.callsPerSecondDuring.toFixed(0)} during; ${a.guest.workloadFrames} workload frames checked`,
          ]
        : []),
      ...a.failures.map((f) => `- ✗ ${f}`),
      "",
    ].join("\n"),
  );
  const failed = r.attacks.filter((a) => a.failures.length > 0).length;
  return [
    `# Attack harness report (${r.startedAt})`,
    "",
    `${r.attacks.length} attacks, ${failed} failed. Hosts: ${r.hosts}. Scale: ${r.scale}.`,
    ...r.notes.map((n) => `\n${n}`),
    "",
    `guest ratio: the normal guest's acknowledged rounds a second during the attack over just before (⚠ below ${GUEST_RATIO_FLAG}: look, on a quiet machine). Peak RSS of the attacked node in MiB.`,
    "",
    "| attack | at | epoch changes | guest ratio | lost acked | peak RSS | refusals counted | verdict |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
    "",
    "## Details",
    "",
    ...details,
  ].join("\n");
}

export function writeReport(dir: string, r: HostileReport): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "report.json"), `${JSON.stringify(r, null, 2)}\n`);
  writeFileSync(join(dir, "report.md"), markdown(r));
}
