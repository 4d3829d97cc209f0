// A real Prometheus server on a free loopback port with a temporary data dir, for the system
// tests; and the project's deploy/prometheus files turned into a test copy (targets replaced by
// live nodes, intervals of a second, `for:` shortened). stop() kills it and removes the dir; an
// exit guard kills it if the run ends without stopping it.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "@vgpu-ha/daemon";
import { parse, stringify } from "yaml";
import { startServerProcess } from "./server-process.js";

export const DEPLOY_PROMETHEUS = fileURLToPath(
  new URL("../../deploy/prometheus/", import.meta.url),
);

export interface PrometheusServer {
  /** Base URL, e.g. http://127.0.0.1:39090 */
  readonly url: string;
  readonly process: ChildProcess;
  /** GET /api/v1/<path>; throws unless Prometheus answers status "success". */
  api<T>(path: string): Promise<T>;
  /** An instant query: the result vector. */
  query(promql: string): Promise<Sample[]>;
  stop(): Promise<void>;
}

export interface Sample {
  readonly metric: Record<string, string>;
  readonly value: [number, string];
}

type Json = Record<string, unknown>;

/**
 * The project's prometheus.yml and alerts.yml, for a test: the `vgpu-ha` job's targets (in the
 * file's order) become `targets`, every interval `intervalS`, and each rule's `for:` at most
 * `forS` seconds. Returns the config's text; the rules go to `<dir>/alerts.yml`.
 */
export function testConfig(options: {
  readonly dir: string;
  readonly targets: readonly string[];
  readonly intervalS?: number;
  readonly forS?: number;
}): string {
  const interval = `${options.intervalS ?? 1}s`;
  const config = parse(readFileSync(join(DEPLOY_PROMETHEUS, "prometheus.yml"), "utf8")) as Json;
  config.global = {
    ...(config.global as Json),
    scrape_interval: interval,
    evaluation_interval: interval,
  };
  const jobs = config.scrape_configs as Json[];
  const job = jobs.find((j) => j.job_name === "vgpu-ha");
  if (!job) throw new Error("prometheus.yml has no vgpu-ha job");
  job.scrape_interval = interval;
  job.scrape_timeout = interval;
  const statics = job.static_configs as { targets: string[]; labels?: Json }[];
  if (statics.length !== options.targets.length) {
    throw new Error(
      `prometheus.yml has ${statics.length} targets, the test ${options.targets.length}`,
    );
  }
  statics.forEach((s, i) => {
    s.targets = [options.targets[i]!];
  });
  const rules = parse(readFileSync(join(DEPLOY_PROMETHEUS, "alerts.yml"), "utf8")) as {
    groups: { rules: Json[] }[];
  };
  for (const group of rules.groups) {
    for (const rule of group.rules) if (rule.for !== undefined) rule.for = `${options.forS ?? 2}s`;
  }
  const rulesFile = join(options.dir, "alerts.yml");
  writeFileSync(rulesFile, stringify(rules));
  config.rule_files = [rulesFile];
  return stringify(config);
}

export async function startPrometheus(
  binary: string,
  configText: string,
): Promise<PrometheusServer> {
  const dir = mkdtempSync(join(tmpdir(), "vgpu-prometheus-"));
  const configFile = join(dir, "prometheus.yml");
  writeFileSync(configFile, configText);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const { process: child, stop } = await startServerProcess({
    name: "prometheus",
    binary,
    args: [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--log.level=warn",
    ],
    dir,
    readyUrl: `${url}/-/ready`,
    readyTimeoutMs: 30_000,
    stopSignal: "SIGTERM",
  });
  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${url}/api/v1/${path}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== "success") throw new Error(`prometheus ${path}: ${body.error}`);
    return body.data;
  };
  const query = async (promql: string) =>
    (await api<{ result: Sample[] }>(`query?query=${encodeURIComponent(promql)}`)).result;
  return { url, process: child, api, query, stop };
}
