// Proves the metrics registry follows the Prometheus conventions promtool checks (vgpu_ prefix,
// _total only on counters, histograms in base units, bounded labels) by reading every metric a
// fresh registry exposes, and that the scrape-time gauges read the node's state.
import { describe, expect, it } from "vitest";
import { createMetrics, type NodeGauges, type ReplicationGauges } from "./metrics.js";

const replication: ReplicationGauges = {
  lastSeq: 10,
  appliedSeq: 7,
  acknowledgedSeq: 6,
  lagEntries: 3,
  lagBytes: 300,
  lagSeconds: 0.02,
  connected: true,
  snapshotInProgress: false,
  eligible: false,
  degraded: false,
  leaseRemainingSeconds: 0.4,
};

const gauges: NodeGauges = {
  role: () => "primary",
  epoch: () => 3,
  sessions: () => 1,
  contexts: () => 2,
  bos: () => 4,
  vramUsedBytes: () => 8192,
  vramTotalBytes: () => 1 << 30,
  replication: () => replication,
  leaseDurationSeconds: () => 0.5,
};

/** Labels that would make the series unbounded (one per session, handle, buffer …). */
const UNBOUNDED_LABELS = ["session", "session_id", "handle", "bo", "context", "frame", "seq"];

async function exposed() {
  const m = createMetrics(gauges);
  return { m, json: await m.registry.getMetricsAsJSON() };
}

describe("metrics", () => {
  it("names every vgpu metric by the Prometheus conventions", async () => {
    const { json } = await exposed();
    const ours = json.filter((x) => x.name.startsWith("vgpu_"));
    expect(ours.length).toBeGreaterThan(30);
    for (const metric of json) {
      const type = String(metric.type);
      if (type === "counter") expect(metric.name, metric.name).toMatch(/_total$/);
      else expect(metric.name, `${metric.name} is a ${type}`).not.toMatch(/_total$/);
      if (type === "histogram" && metric.name.startsWith("vgpu_")) {
        expect(metric.name).toMatch(/_(seconds|bytes)$/);
      }
    }
    for (const metric of ours) {
      expect(metric.name).toMatch(/^vgpu_[a-z0-9_]+$/);
      expect(metric.help.length, metric.name).toBeGreaterThan(10);
    }
  });

  it("never labels by session, handle or another unbounded value", async () => {
    const { m } = await exposed();
    m.callStats.call("launch", "OK").count++;
    m.callStats.duration("launch").observe(0.001);
    const json = await m.registry.getMetricsAsJSON();
    const labels = new Set(
      json.flatMap((x) => x.values.flatMap((v) => Object.keys(v.labels as object))),
    );
    expect(labels.has("op")).toBe(true);
    for (const bad of UNBOUNDED_LABELS) expect(labels.has(bad), bad).toBe(false);
  });

  it("leaves out prom-client's gauges named _total (promtool refuses them)", async () => {
    const { json } = await exposed();
    const names = json.map((x) => x.name);
    expect(names).toContain("nodejs_active_handles");
    expect(names).not.toContain("nodejs_active_handles_total");
    expect(names).not.toContain("nodejs_active_requests_total");
    expect(names).not.toContain("nodejs_active_resources_total");
  });

  it("reads role, lease and lag from the node at scrape time", async () => {
    const { m } = await exposed();
    const text = await m.registry.metrics();
    expect(text).toContain('vgpu_role{role="primary"} 1');
    expect(text).toContain('vgpu_role{role="standby"} 0');
    expect(text).toContain("vgpu_epoch 3");
    expect(text).toContain("vgpu_lease_remaining_seconds 0.4");
    expect(text).toContain("vgpu_lease_duration_seconds 0.5");
    expect(text).toContain("vgpu_replication_lag_entries 3");
    expect(text).toContain("vgpu_replication_lag_seconds 0.02");
    expect(text).toContain("vgpu_failovers_total 0");
  });
});
