// Proves the real /metrics output of a running primary + standby pair (under a guest's load, so
// the labelled counters and histograms have samples) passes `promtool check metrics`, and that
// it has the metrics the Operations issue lists, on the node where they mean something.
import { spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CountingGuest } from "../support/counting-guest.js";
import { requireBinary } from "../support/external.js";
import { FailoverPair, GUEST } from "../support/failover-pair.js";
import { Metrics, sleep, status, waitFor } from "../support/ops-client.js";

const promtool = requireBinary("promtool", "prometheus");

/** What the issue asks for, by the names they have (packages/common/src/metrics.ts). */
const EXPECTED = [
  "vgpu_role",
  "vgpu_epoch",
  "vgpu_lease_remaining_seconds",
  "vgpu_lease_duration_seconds",
  "vgpu_last_seq",
  "vgpu_applied_seq",
  "vgpu_acknowledged_seq",
  "vgpu_replication_lag_entries",
  "vgpu_replication_lag_bytes",
  "vgpu_replication_lag_seconds",
  "vgpu_replication_entries_total",
  "vgpu_replication_bytes_total",
  "vgpu_mmio_stores_total",
  "vgpu_mmio_page_batches_total",
  "vgpu_mmio_pages_shipped_total",
  "vgpu_mmio_shipped_bytes_total",
  "vgpu_calls_total",
  "vgpu_call_duration_seconds",
  "vgpu_snapshot_bytes_total",
  "vgpu_snapshot_duration_seconds",
  "vgpu_failovers_total",
  "vgpu_promotions_total",
  "vgpu_demotions_total",
  "vgpu_switchovers_total",
  "vgpu_divergences_total",
  "vgpu_stale_epoch_refusals_total",
  "vgpu_split_brain_discarded_total",
  "vgpu_sessions",
  "vgpu_contexts",
  "vgpu_bos",
  "vgpu_vram_used_bytes",
  "vgpu_vram_total_bytes",
  "process_cpu_seconds_total",
  "nodejs_heap_size_used_bytes",
];

const typesOf = (text: string) =>
  new Set([...text.matchAll(/^# TYPE (\S+) \S+$/gm)].map((m) => m[1]!));

describe.skipIf(!promtool)("promtool check metrics on a live pair", () => {
  let pair: FailoverPair | undefined;
  const scraped = new Map<string, string>();

  beforeAll(async () => {
    pair = await FailoverPair.create();
    const p = pair;
    await waitFor(
      "a streaming",
      async () => (await status(p.node("a"))).replication?.state === "streaming",
      { timeoutMs: 20_000 },
    );
    const guest = await CountingGuest.open(p.endpoints, GUEST.tenant, GUEST.token);
    guest.start();
    await sleep(500);
    await guest.stop();
    await guest.session.close();
    for (const name of ["a", "b"] as const) {
      scraped.set(name, await (await fetch(`${p.node(name).ops}/metrics`)).text());
    }
  });
  afterAll(async () => pair?.cleanup());

  it.each(["a", "b"])("node %s: promtool accepts its /metrics", (name) => {
    const text = scraped.get(name)!;
    const r = spawnSync(promtool!, ["check", "metrics"], {
      input: text,
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(r.stdout + r.stderr).toBe("");
    expect(r.status).toBe(0);
  });

  it("exposes every metric of the issue's list on both nodes", () => {
    for (const [name, text] of scraped) {
      const types = typesOf(text);
      for (const metric of EXPECTED) expect(types.has(metric), `${name}: ${metric}`).toBe(true);
    }
  });

  it("has samples where they mean something: calls on the primary, applies on the standby", () => {
    const a = new Metrics(scraped.get("a")!);
    const b = new Metrics(scraped.get("b")!);
    expect(a.get("vgpu_role", { role: "primary" })).toBe(1);
    expect(b.get("vgpu_role", { role: "standby" })).toBe(1);
    expect(a.get("vgpu_calls_total", { op: "kernelLaunch", code: "OK" })).toBeGreaterThan(0);
    expect(a.get("vgpu_call_duration_seconds_count", { op: "kernelLaunch" })).toBeGreaterThan(0);
    expect(a.get("vgpu_mmio_stores_total")).toBeGreaterThan(0);
    expect(a.get("vgpu_replication_entries_total")).toBeGreaterThan(0);
    expect(a.get("vgpu_lease_duration_seconds")).toBe(0.5);
    expect(a.get("vgpu_lease_remaining_seconds")).toBeGreaterThan(0);
    expect(b.get("vgpu_applied_entries_total")).toBeGreaterThan(0);
    expect(a.get("vgpu_promotions_total", { reason: "cold_start" })).toBe(1);
  });
});
