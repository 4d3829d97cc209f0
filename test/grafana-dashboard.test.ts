// Proves deploy/grafana/vgpu-ha.json is an importable dashboard whose queries name only metrics
// that vgpud exports (names taken from a live registry, createMetrics in @vgpu-ha/common), all
// through the ${DS_PROMETHEUS} input and the vgpu-ha job, and that it shows what operators need:
// roles and epoch, lag in entries, bytes and seconds, throughput, failovers, lease remaining.
// (test/system/prometheus-scrape.test.ts runs every query on a real Prometheus.)
import { createMetrics, NO_REPLICATION, type ReplicationGauges } from "@vgpu-ha/common";
import { describe, expect, it } from "vitest";
import { dashboardQueries, loadDashboard, metricNames } from "./support/grafana.js";

const idle: ReplicationGauges = NO_REPLICATION;

/** What a node exports, with the series names histograms add; plus Prometheus's own `up`. */
async function exported(): Promise<Set<string>> {
  const { registry } = createMetrics({
    role: () => "standby",
    epoch: () => 0,
    sessions: () => 0,
    contexts: () => 0,
    bos: () => 0,
    vramUsedBytes: () => 0,
    vramTotalBytes: () => 0,
    replication: () => idle,
  });
  const names = new Set(["up"]);
  for (const m of await registry.getMetricsAsJSON()) {
    names.add(m.name);
    if (String(m.type) === "histogram") {
      for (const suffix of ["_bucket", "_sum", "_count"]) names.add(m.name + suffix);
    }
  }
  return names;
}

// Grafana's datasource input placeholder, literally (not a template string).
const DS = ["$", "{DS_PROMETHEUS}"].join("");

describe("deploy/grafana/vgpu-ha.json", () => {
  const dashboard = loadDashboard();
  const queries = dashboardQueries(dashboard);

  it("asks for a Prometheus data source on import and uses it everywhere", () => {
    expect(dashboard.__inputs).toEqual([
      expect.objectContaining({
        name: "DS_PROMETHEUS",
        type: "datasource",
        pluginId: "prometheus",
      }),
    ]);
    const panels = dashboard.panels.filter((p) => p.type !== "row");
    expect(panels.length).toBeGreaterThanOrEqual(10);
    for (const p of panels) {
      expect(p.datasource?.uid, p.title).toBe(DS);
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets!) expect(t.datasource?.uid, p.title).toBe(DS);
    }
    expect(new Set(dashboard.panels.map((p) => p.id)).size).toBe(dashboard.panels.length);
  });

  it("names only metrics vgpud exports, always of the vgpu-ha job", async () => {
    const known = await exported();
    for (const { where, expr } of queries) {
      const names = metricNames(expr);
      expect(names.length, where).toBeGreaterThan(0);
      for (const name of names) expect(known.has(name), `${where}: ${name}`).toBe(true);
      // a bare vgpu_/nodejs_/process_ name without a selector would escape the check above
      for (const m of expr.matchAll(/\b(?:vgpu|nodejs|process)_[a-z0-9_]+/g)) {
        expect(known.has(m[0]), `${where}: ${m[0]}`).toBe(true);
      }
      expect(expr, where).toContain('job="vgpu-ha"');
    }
  });

  it("shows roles, epoch, lag, throughput, failovers and the lease", () => {
    const used = new Set(queries.flatMap((q) => metricNames(q.expr)));
    for (const metric of [
      "vgpu_role",
      "vgpu_epoch",
      "vgpu_replication_lag_entries",
      "vgpu_replication_lag_bytes",
      "vgpu_replication_lag_seconds",
      "vgpu_calls_total",
      "vgpu_replication_bytes_total",
      "vgpu_failovers_total",
      "vgpu_promotions_total",
      "vgpu_switchovers_total",
      "vgpu_lease_remaining_seconds",
    ]) {
      expect(used.has(metric), metric).toBe(true);
    }
  });
});
