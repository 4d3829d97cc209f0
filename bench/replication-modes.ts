// standalone vs async vs sync, side by side: all three set-ups run at once (idle ones cost a
// heartbeat), and each workload is measured in short rounds that visit the modes in rotating
// order (ABC, BCA, CAB, …), so load from elsewhere on the machine falls on every mode alike.
// A throughput is the median of its rounds; a ratio between modes is the median of the
// per-round ratios (each from measurements taken one after the other).
import os from "node:os";
import { type Cluster, startPair, startStandalone } from "./cluster.js";
import { profilePhase } from "./cpu-profile.js";
import {
  CALL_WINDOW,
  type CpuUse,
  DMA_CHUNK_BYTES,
  DMA_WINDOW,
  dmaWrites,
  latency,
  smallCalls,
} from "./guest-workload.js";
import type { Metric, Target } from "./report.js";
import { inRounds, medianRatio } from "./rounds.js";
import { median } from "./timing.js";

export const MODES = ["standalone", "async", "sync"] as const;
export type ModeName = (typeof MODES)[number];

const SESSIONS = 8;
const CALL_ROUNDS = 5;
const CALL_DURATIONS = { warmupMs: 300, measureMs: 1500 };
const DMA_ROUNDS = 3;
const DMA_DURATIONS = { warmupMs: 300, measureMs: 1000 };
const LATENCY_ROUNDS = 3;
const LATENCY_MS = 700;

type Measured = CpuUse & { perSecond: number };

const WORKLOADS = ["calls", "dma", "latency"] as const;
type Workload = (typeof WORKLOADS)[number];

/**
 * The workloads the phase measures: BENCH_MODES_WORKLOADS=dma,latency (or any of calls, dma,
 * latency) for a short run of those alone; all three when unset.
 */
export function modesWorkloads(env = process.env.BENCH_MODES_WORKLOADS): Set<Workload> {
  if (env === undefined || env.trim() === "") return new Set(WORKLOADS);
  const chosen = env.split(",").map((w) => w.trim());
  for (const w of chosen) {
    if (!(WORKLOADS as readonly string[]).includes(w)) throw new Error(`unknown workload ${w}`);
  }
  return new Set(chosen as Workload[]);
}

type DmaMeasured = Measured & { mbPerSecond: number };

export interface ModeRounds {
  readonly calls8: Measured[];
  readonly dma: DmaMeasured[];
  readonly latency: { p50: number; p99: number; calls: number }[];
}

/** Set-ups whose ports keep HTTP/2's 64 KiB windows (before #15), measured beside the DMA. */
const H2_WINDOW_SETUPS = ["standalone", "sync"] as const;
type H2WindowSetup = (typeof H2_WINDOW_SETUPS)[number];

export type ModesResult = Record<ModeName, ModeRounds> & {
  /**
   * DMA rounds of a standalone node and a sync pair with every HTTP/2 window at 64 KiB, and of
   * the ordinary ones again in the same rounds (new*): after the modes' own rounds, with the
   * async pair stopped. Empty without the dma workload.
   */
  readonly h2Windows: Record<H2WindowSetup, DmaMeasured[]> & {
    readonly newStandalone?: DmaMeasured[];
    readonly newSync?: DmaMeasured[];
  };
};

export async function measureModes(profiles: string[]): Promise<ModesResult> {
  const clusters = new Map<ModeName, Cluster>();
  const h2 = new Map<`${H2WindowSetup}-h2`, Cluster>();
  const workloads = modesWorkloads();
  const none = { standalone: [], async: [], sync: [] };
  try {
    clusters.set("standalone", await startStandalone("standalone"));
    clusters.set("async", await startPair({ label: "async", mode: "async" }));
    clusters.set("sync", await startPair({ label: "sync", mode: "sync" }));
    const calls8 = !workloads.has("calls")
      ? none
      : await inRounds(clusters, CALL_ROUNDS, async (mode, c, round) => {
          const r = await profilePhase(c.nodes, `small_calls_8-round${round + 1}`, () =>
            smallCalls(c.primary.guest, c.nodes, SESSIONS, CALL_DURATIONS),
          );
          profiles.push(...r.profiles);
          console.log(
            `  ${mode} small_calls_8 round ${round + 1}: ${Math.round(r.result.perSecond)}/s`,
          );
          return r.result;
        });
    const dmaRound = async (mode: string, c: Cluster, round: number) => {
      const r = await profilePhase(c.nodes, `dma_write_64k-round${round + 1}`, () =>
        dmaWrites(c.primary.guest, c.nodes, DMA_DURATIONS),
      );
      profiles.push(...r.profiles);
      console.log(
        `  ${mode} dma_write_64k round ${round + 1}: ${r.result.mbPerSecond.toFixed(0)} MB/s`,
      );
      return r.result;
    };
    const dma = !workloads.has("dma") ? none : await inRounds(clusters, DMA_ROUNDS, dmaRound);
    const lat = !workloads.has("latency")
      ? none
      : await inRounds(clusters, LATENCY_ROUNDS, async (mode, c, round) => {
          const r = await latency(c.primary.guest, LATENCY_MS);
          console.log(
            `  ${mode} latency round ${round + 1}: p50 ${r.p50.toFixed(0)} us, p99 ${r.p99.toFixed(0)} us`,
          );
          return r;
        });
    const out = {} as Record<ModeName, ModeRounds>;
    for (const m of MODES) out[m] = { calls8: calls8[m], dma: dma[m], latency: lat[m] };
    if (!workloads.has("dma")) return { ...out, h2Windows: { standalone: [], sync: [] } };
    // The windows side by side: the async pair makes way (BENCH_PIN_CORES: 6 nodes, not 8).
    await clusters.get("async")!.stop();
    clusters.delete("async");
    h2.set("standalone-h2", await startStandalone("standalone-h2", { h2DefaultWindows: true }));
    h2.set("sync-h2", await startPair({ label: "sync-h2", mode: "sync", h2DefaultWindows: true }));
    const sideBySide = new Map<string, Cluster>([
      ["standalone", clusters.get("standalone")!],
      ["standalone-h2", h2.get("standalone-h2")!],
      ["sync", clusters.get("sync")!],
      ["sync-h2", h2.get("sync-h2")!],
    ]);
    const w = await inRounds(sideBySide, DMA_ROUNDS, dmaRound);
    return {
      ...out,
      h2Windows: {
        standalone: w["standalone-h2"]!,
        sync: w["sync-h2"]!,
        newStandalone: w.standalone!,
        newSync: w.sync!,
      },
    };
  } finally {
    for (const c of [...clusters.values(), ...h2.values()]) await c.stop();
  }
}

/** Median over rounds of mode/standalone, each round's pair measured back to back. */
function roundRatio(
  r: Record<ModeName, ModeRounds>,
  mode: ModeName,
  series: (x: ModeRounds) => readonly number[],
): number {
  return medianRatio(series(r[mode]), series(r.standalone));
}

const callsAt = (x: ModeRounds) => x.calls8.map((m) => m.perSecond);
const dmaAt = (x: ModeRounds) => x.dma.map((m) => m.mbPerSecond);

/** CPU of client and nodes per call, µs: what a call costs whatever else runs. */
const cpuUsPerCall = (m: Measured) =>
  ((m.clientPct + m.nodePcts.reduce((a, b) => a + b, 0)) / 100 / m.perSecond) * 1e6;

/** CPU of the node serving guests (standalone or primary) per call, µs. */
export const nodeUsPerCall = (m: Measured) => (m.nodePcts[0]! / 100 / m.perSecond) * 1e6;

const atLeast = (value: number): Target => ({ kind: "atLeast", value });

/** The metrics of the workloads measured (modesWorkloads): a short run reports only its own. */
export function modeMetrics(r: ModesResult): Metric[] {
  const measured = (m: Metric) =>
    (!/small_calls|cpu_per_call/.test(m.name) || r.standalone.calls8.length > 0) &&
    (!m.name.includes("dma_write") || r.standalone.dma.length > 0) &&
    (!m.name.includes("latency") || r.standalone.latency.length > 0);
  return [...allModeMetrics(r), ...windowMetrics(r)].filter(measured);
}

/** The DMA with the #15 windows against HTTP/2's 64 KiB ones, same rounds. */
function windowMetrics(r: ModesResult): Metric[] {
  return H2_WINDOW_SETUPS.flatMap((setup) => [
    {
      name: `${setup}_dma_write_64k_h2_window_mb_per_s`,
      value: median(r.h2Windows[setup].map((m) => m.mbPerSecond)),
      unit: `MB/s with every HTTP/2 window at 64 KiB (median of ${r.h2Windows[setup].length})`,
    },
    {
      name: `${setup}_dma_write_64k_over_h2_window`,
      value: medianRatio(
        (setup === "standalone" ? r.h2Windows.newStandalone : r.h2Windows.newSync)?.map(
          (m) => m.mbPerSecond,
        ) ?? [],
        r.h2Windows[setup].map((m) => m.mbPerSecond),
      ),
      unit: "ratio",
    },
  ]);
}

function allModeMetrics(r: Record<ModeName, ModeRounds>): Metric[] {
  const out: Metric[] = [];
  for (const mode of MODES) {
    const x = r[mode];
    const cpu = (pick: (u: CpuUse) => number) => median(x.calls8.map(pick));
    const standby =
      mode === "standalone" ? "" : `, standby ${cpu((u) => u.nodePcts[1]!).toFixed(0)} %`;
    out.push(
      {
        name: `${mode}_small_calls_per_s_8`,
        value: median(x.calls8.map((m) => m.perSecond)),
        unit: `calls/s (median of ${x.calls8.length})`,
      },
      {
        name: `${mode}_small_calls_8_cpu_us_per_call`,
        value: median(x.calls8.map(cpuUsPerCall)),
        unit: `CPU us (client ${cpu((u) => u.clientPct).toFixed(0)} %, node ${cpu((u) => u.nodePcts[0]!).toFixed(0)} %${standby}, machine ${cpu((u) => u.machinePct).toFixed(0)} % of ${os.cpus().length * 100})`,
      },
      {
        name: `${mode}_small_calls_8_node_cpu_us_per_call`,
        value: median(x.calls8.map(nodeUsPerCall)),
        unit: "CPU us of the serving node",
      },
      {
        name: `${mode}_dma_write_64k_mb_per_s`,
        value: median(x.dma.map((m) => m.mbPerSecond)),
        unit: `MB/s (1e6 B, median of ${x.dma.length})`,
        ...(mode === "standalone" ? { target: { ...atLeast(200), note: "#15" } } : {}),
      },
      {
        name: `${mode}_call_latency_p50_us`,
        value: median(x.latency.map((l) => l.p50)),
        unit: "us",
      },
      {
        name: `${mode}_call_latency_p99_us`,
        value: median(x.latency.map((l) => l.p99)),
        unit: "us",
      },
    );
  }
  const syncCpuRatio =
    median(r.sync.calls8.map(cpuUsPerCall)) / median(r.standalone.calls8.map(cpuUsPerCall));
  out.push(
    {
      name: "sync_over_standalone_small_calls_8",
      value: roundRatio(r, "sync", callsAt),
      // No target on this box (#15): client, primary and standby share its cores, so with the
      // cores busy the ratio is the inverse of the total CPU per call (the next field).
      unit: "ratio",
    },
    {
      name: "sync_over_standalone_small_calls_8_cpu_ceiling",
      value: 1 / syncCpuRatio,
      unit: "ratio",
    },
    {
      name: "async_over_standalone_small_calls_8",
      value: roundRatio(r, "async", callsAt),
      unit: "ratio",
      target: atLeast(0.85),
    },
    {
      name: "sync_over_standalone_cpu_per_call",
      value: syncCpuRatio,
      unit: "ratio",
    },
    {
      name: "async_over_standalone_cpu_per_call",
      value:
        median(r.async.calls8.map(cpuUsPerCall)) / median(r.standalone.calls8.map(cpuUsPerCall)),
      unit: "ratio",
    },
    {
      name: "sync_node_bound_small_calls_8",
      value:
        median(r.standalone.calls8.map(nodeUsPerCall)) / median(r.sync.calls8.map(nodeUsPerCall)),
      unit: "ratio",
      target: { ...atLeast(0.8), note: "#15" },
    },
    {
      name: "async_node_bound_small_calls_8",
      value:
        median(r.standalone.calls8.map(nodeUsPerCall)) / median(r.async.calls8.map(nodeUsPerCall)),
      unit: "ratio",
    },
    {
      name: "sync_over_standalone_dma_write_64k",
      value: roundRatio(r, "sync", dmaAt),
      unit: "ratio",
    },
    {
      name: "async_over_standalone_dma_write_64k",
      value: roundRatio(r, "async", dmaAt),
      unit: "ratio",
    },
  );
  return out;
}

export const MODES_NOTE = `modes: standalone, async and sync set-ups run side by side; small calls are fences, ${SESSIONS} sessions x ${CALL_WINDOW} outstanding, ${CALL_ROUNDS} rounds of ${CALL_DURATIONS.warmupMs} ms warm-up + ${CALL_DURATIONS.measureMs} ms; DMA ${DMA_CHUNK_BYTES / 1024} KiB writes, ${DMA_WINDOW} outstanding, ${DMA_ROUNDS} rounds of ${DMA_DURATIONS.warmupMs} + ${DMA_DURATIONS.measureMs} ms; latency: one fence at a time, ${LATENCY_ROUNDS} rounds of ${LATENCY_MS} ms; rounds visit the modes in rotating order; BENCH_MODES_WORKLOADS=dma (calls, dma, latency) measures only those; then (async pair stopped) DMA rounds of the standalone node, the sync pair and a standalone node and sync pair whose HTTP/2 windows are all 64 KiB (before #15), in rotating order: *_h2_window_mb_per_s and *_over_h2_window (median of per-round ratios); values are medians of rounds, mode/standalone ratios medians of per-round ratios (all rounds in data.modes); cpu_us_per_call = (client + node + standby CPU) / calls; node_cpu_us_per_call = CPU of the serving node (standalone or primary) / calls; *_node_bound_* = standalone node µs/call over the mode's primary µs/call: the throughput ratio to expect when the serving node is the bottleneck and the client and standby have cores of their own; sync_over_standalone_small_calls_8_cpu_ceiling = standalone's (client + node) CPU per call over sync's (client + primary + standby): where all of them share busy cores, as on a 2-core machine, sync/standalone throughput cannot exceed it`;
