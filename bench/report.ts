// A benchmark's report: an aligned table on stdout and bench/results/<name>.json with the
// machine it ran on, every metric's value, unit and target, and the ratios between metrics
// measured side by side. Results go under the repository whatever the working directory.
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";

/** A bound a metric should meet; `note` says where the bound comes from. */
export interface Target {
  readonly kind: "atLeast" | "atMost";
  readonly value: number;
  readonly note?: string;
}

export interface Metric {
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  readonly target?: Target;
}

export interface Report {
  readonly name: string;
  /** Fields written at the JSON's top level, after `benchmark` (gpu.json's `adapter`). */
  readonly header?: Readonly<Record<string, unknown>>;
  readonly metrics: readonly Metric[];
  /** Named quotients of metrics from the same run (e.g. fill over memcpy). */
  readonly ratios?: Readonly<Record<string, number>>;
  /** Conditions a reader needs to judge the numbers (shared cores, sizes, durations). */
  readonly notes?: readonly string[];
  /** Raw measurements and methods behind the metrics, written to the JSON as `data`. */
  readonly data?: Readonly<Record<string, unknown>>;
}

/** bench/results/, from this file's place in bench/dist/. */
const RESULTS_DIR = fileURLToPath(new URL("../results/", import.meta.url));

export function meets(metric: Metric): boolean | null {
  const t = metric.target;
  if (t === undefined) return null;
  return t.kind === "atLeast" ? metric.value >= t.value : metric.value <= t.value;
}

export function formatValue(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs >= 1e6) return value.toExponential(3);
  if (abs >= 1000) return Math.round(value).toString();
  if (abs >= 10) return value.toFixed(1);
  return value.toFixed(3);
}

function formatTarget(t: Target | undefined): string {
  if (t === undefined) return "";
  const bound = `${t.kind === "atLeast" ? ">=" : "<="} ${formatValue(t.value)}`;
  return t.note === undefined ? bound : `${bound} (${t.note})`;
}

export function formatTable(metrics: readonly Metric[]): string {
  const rows = [
    ["name", "value", "unit", "target", "ok"],
    ...metrics.map((m) => {
      const ok = meets(m);
      return [m.name, formatValue(m.value), m.unit, formatTarget(m.target), okText(ok)];
    }),
  ];
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((r) => r[col]!.length)));
  const line = (r: string[]) =>
    r
      .map((cell, col) => (col === 1 ? cell.padStart(widths[col]!) : cell.padEnd(widths[col]!)))
      .join("  ")
      .trimEnd();
  const rule = widths.map((w) => "-".repeat(w)).join("  ");
  return [line(rows[0]!), rule, ...rows.slice(1).map(line)].join("\n");
}

const okText = (ok: boolean | null) => (ok === null ? "" : ok ? "yes" : "NO");

export function machineInfo() {
  const cpus = os.cpus();
  return {
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? "unknown",
    totalMemoryMiB: Math.round(os.totalmem() / 2 ** 20),
    date: new Date().toISOString(),
  };
}

/** Prints the table and writes the JSON; returns the path written. */
export function publish(report: Report): string {
  console.log(`\n${report.name}\n`);
  console.log(formatTable(report.metrics));
  for (const note of report.notes ?? []) console.log(`note: ${note}`);
  const json = {
    benchmark: report.name,
    ...report.header,
    machine: machineInfo(),
    notes: report.notes ?? [],
    metrics: Object.fromEntries(report.metrics.map((m) => [m.name, m.value])),
    ratios: report.ratios ?? {},
    details: report.metrics.map((m) => ({
      name: m.name,
      value: m.value,
      unit: m.unit,
      target: m.target ?? null,
      ok: meets(m),
    })),
    ...(report.data === undefined ? {} : { data: report.data }),
  };
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = `${RESULTS_DIR}${report.name}.json`;
  writeFileSync(path, `${JSON.stringify(json, null, 2)}\n`);
  console.log(`wrote ${path}`);
  return path;
}
