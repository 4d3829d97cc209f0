// Runs a range of seeds and reports: each failing run with its seed and every parameter, so
// `node test/dist/sim/run.js --seed S --seeds 1` replays it exactly.
import { drawParams, formatParams } from "./params.js";
import type { SimResult, SimStats } from "./sim-result.js";
import { simulate } from "./simulation.js";

export interface SeedsReport {
  readonly baseSeed: number;
  readonly runs: number;
  readonly failures: readonly SimResult[];
  /** Stats summed over every run (to see that each path was exercised). */
  readonly totals: SimStats;
  readonly elapsedMs: number;
}

export function runSeeds(
  baseSeed: number,
  runs: number,
  onTrace?: (line: string) => void,
  onResult?: (result: SimResult) => void,
): SeedsReport {
  const started = performance.now();
  const failures: SimResult[] = [];
  let totals: SimStats | undefined;
  for (let i = 0; i < runs; i++) {
    const result = simulate(drawParams((baseSeed + i) >>> 0), onTrace);
    if (result.failure !== undefined) failures.push(result);
    totals = add(totals, result.stats);
    onResult?.(result);
  }
  return { baseSeed, runs, failures, totals: totals!, elapsedMs: performance.now() - started };
}

function add(sum: SimStats | undefined, stats: SimStats): SimStats {
  if (sum === undefined) return { ...stats };
  for (const key of Object.keys(stats) as (keyof SimStats)[]) sum[key] += stats[key];
  return sum;
}

/** A failing (or, verbose, any) run: the failure, the parameters, what it did. */
export function formatResult(result: SimResult): string {
  const head = result.failure === undefined ? `seed ${result.seed}: ok` : `FAIL ${result.failure}`;
  const stats = Object.entries(result.stats)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  return [
    head,
    formatParams(drawParams(result.seed)),
    `  result: endMs=${result.endMs.toFixed(1)} lastSeq=${result.lastSeq} trace=${result.trace.toString(16)}`,
    `  stats: ${stats}`,
    `  replay: node test/dist/sim/run.js --seed ${result.seed} --seeds 1 --verbose`,
  ].join("\n");
}

export function formatSummary(report: SeedsReport): string {
  const totals = Object.entries(report.totals)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  return [
    `${report.runs} seeds from ${report.baseSeed}: ${report.failures.length} failed in ${(report.elapsedMs / 1000).toFixed(1)}s`,
    `  totals: ${totals}`,
    ...(report.failures.length > 0
      ? [`  failing seeds: ${report.failures.map((f) => f.seed).join(" ")}`]
      : []),
  ].join("\n");
}
