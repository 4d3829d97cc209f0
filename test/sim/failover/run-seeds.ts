// Runs a range of failover seeds and reports each failing run with its seed and every
// parameter, so `npm run sim -- --failover --seed S --seeds 1 --verbose` replays it exactly.
import { drawFailoverParams, formatFailoverParams } from "./params.js";
import { type FailoverResult, simulateFailover } from "./simulation.js";
import type { FailoverStats } from "./stats.js";

export interface FailoverReport {
  readonly baseSeed: number;
  readonly runs: number;
  readonly failures: readonly FailoverResult[];
  readonly totals: FailoverStats;
  readonly elapsedMs: number;
}

export function runFailoverSeeds(
  baseSeed: number,
  runs: number,
  onTrace?: (line: string) => void,
  onResult?: (result: FailoverResult) => void,
): FailoverReport {
  const started = performance.now();
  const failures: FailoverResult[] = [];
  let totals: FailoverStats | undefined;
  for (let i = 0; i < runs; i++) {
    const result = simulateFailover(drawFailoverParams((baseSeed + i) >>> 0), onTrace);
    if (result.failure !== undefined) failures.push(result);
    totals = add(totals, result.stats);
    onResult?.(result);
  }
  return { baseSeed, runs, failures, totals: totals!, elapsedMs: performance.now() - started };
}

function add(sum: FailoverStats | undefined, stats: FailoverStats): FailoverStats {
  if (sum === undefined) return { ...stats };
  for (const key of Object.keys(stats) as (keyof FailoverStats)[]) {
    sum[key] = key === "promotionEpochMax" ? Math.max(sum[key], stats[key]) : sum[key] + stats[key];
  }
  return sum;
}

export function formatFailoverResult(result: FailoverResult): string {
  const head = result.failure === undefined ? `seed ${result.seed}: ok` : `FAIL ${result.failure}`;
  const stats = Object.entries(result.stats)
    .filter(([, v]) => v !== 0)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  return [
    head,
    formatFailoverParams(drawFailoverParams(result.seed)),
    `  result: endMs=${result.endMs.toFixed(1)} lastSeq=${result.lastSeq} trace=${result.trace.toString(16)}`,
    `  stats: ${stats}`,
    `  replay: npm run sim -- --failover --seed ${result.seed} --seeds 1 --verbose [--trace]`,
  ].join("\n");
}

export function formatFailoverSummary(report: FailoverReport): string {
  const totals = Object.entries(report.totals)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  return [
    `${report.runs} failover seeds from ${report.baseSeed}: ${report.failures.length} failed in ${(report.elapsedMs / 1000).toFixed(1)}s`,
    `  totals: ${totals}`,
    ...(report.failures.length > 0
      ? [`  failing seeds: ${report.failures.map((f) => f.seed).join(" ")}`]
      : []),
  ].join("\n");
}
