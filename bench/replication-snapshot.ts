// A fresh standby catching up by snapshot from 256 MiB and then 1 GiB of buffers (see
// snapshot-catch-up.ts for the method); the rate against raw loopback TCP.
import os from "node:os";
import { otherBuild } from "./before-build.js";
import type { Metric } from "./report.js";
import { type SnapshotCatchUp, snapshotCatchUp } from "./snapshot-catch-up.js";

const MiB = 2 ** 20;
const SNAPSHOT_SIZES = [
  { name: "256m", bytes: 256 * MiB },
  { name: "1g", bytes: 1024 * MiB },
] as const;
const SNAPSHOT_BASELINE_MS = 1500;

/** The sizes to run: all, or those BENCH_SNAPSHOT_SIZES names (e.g. "256m", a quick look). */
function selectedSizes() {
  const env = process.env.BENCH_SNAPSHOT_SIZES;
  if (env === undefined || env === "") return SNAPSHOT_SIZES;
  const names = env.split(",");
  for (const n of names) {
    if (!SNAPSHOT_SIZES.some((s) => s.name === n)) throw new Error(`unknown snapshot size ${n}`);
  }
  return SNAPSHOT_SIZES.filter((s) => names.includes(s.name));
}

export interface Snapshots {
  readonly now: Record<string, SnapshotCatchUp>;
  /** The same sizes with another build's nodes (BENCH_SNAPSHOT_BEFORE), each just before now's. */
  readonly before?: { readonly build: string; readonly runs: Record<string, SnapshotCatchUp> };
}

/**
 * Each size with this build; with BENCH_SNAPSHOT_BEFORE=REV|DIR (before-build.ts) also with
 * that build's nodes, run just before this build's at each size (side by side in one run).
 */
export async function measureSnapshots(profiles: string[]): Promise<Snapshots> {
  const beforeRev = process.env.BENCH_SNAPSHOT_BEFORE;
  const other = beforeRev ? await otherBuild(beforeRev) : undefined;
  const now: Record<string, SnapshotCatchUp> = {};
  const before: Record<string, SnapshotCatchUp> = {};
  for (const size of selectedSizes()) {
    if (other !== undefined) {
      const label = `${size.name}-before`;
      const b = await snapshotCatchUp(label, size.bytes, SNAPSHOT_BASELINE_MS, other.spawn);
      before[size.name] = b;
      profiles.push(...b.profiles);
      console.log(`  ${size.name} (${other.name}): ${Math.round(b.mbPerSecond)} MB/s`);
    }
    const s = await snapshotCatchUp(size.name, size.bytes, SNAPSHOT_BASELINE_MS);
    now[size.name] = s;
    profiles.push(...s.profiles);
    console.log(`  ${size.name}: ${Math.round(s.mbPerSecond)} MB/s`);
  }
  return other === undefined ? { now } : { now, before: { build: other.name, runs: before } };
}

export function snapshotMetrics(
  snapshots: Snapshots,
  rawMbPerSecond: number | undefined,
  rawFreshMbPerSecond?: number,
): Metric[] {
  const out: Metric[] = [];
  for (const [name, s] of Object.entries(snapshots.now)) {
    const p = `snapshot_${name}`;
    out.push(
      { name: `${p}_mb_per_s`, value: s.mbPerSecond, unit: "MB/s (1e6 B)" },
      { name: `${p}_primary_pause_ms`, value: s.pause.maxMs, unit: "ms (longest guest wait)" },
      { name: `${p}_baseline_max_call_ms`, value: s.baseline.maxMs, unit: "ms (no snapshot)" },
      {
        name: `${p}_pause_over_baseline_ms`,
        value: s.pause.maxMs - s.baseline.maxMs,
        unit: "ms",
      },
      { name: `${p}_source_build_ms`, value: s.sourceBuildMs, unit: "ms (log, 1 ms res.)" },
      { name: `${p}_seconds`, value: s.seconds, unit: "s (primary)" },
      { name: `${p}_end_to_end_s`, value: s.endToEndSeconds, unit: "s (standby spawn→streaming)" },
      {
        name: `${p}_catch_up_max_call_ms`,
        value: s.catchUpStall.maxMs,
        unit: `ms (sync reply after; backlog ${s.backlogEntries} entries)`,
      },
      {
        name: `${p}_cpu_primary_pct`,
        value: s.primaryCpuPct,
        unit: `% (standby ${s.standbyCpuPct.toFixed(0)} %, client ${s.clientCpuPct.toFixed(0)} %, machine ${s.machineCpuPct.toFixed(0)} % of ${os.cpus().length * 100})`,
      },
    );
    if (rawMbPerSecond !== undefined) {
      out.push({
        name: `${p}_over_raw_tcp`,
        value: s.mbPerSecond / rawMbPerSecond,
        unit: "ratio",
        target: { kind: "atLeast", value: 0.5, note: "#15" },
      });
    }
    if (rawFreshMbPerSecond !== undefined) {
      out.push({
        name: `${p}_over_raw_tcp_fresh`,
        value: s.mbPerSecond / rawFreshMbPerSecond,
        unit: "ratio (raw TCP into fresh memory: a fresh standby's floor)",
      });
    }
    out.push(...transferCpuMetrics(p, s));
    const b = snapshots.before?.runs[name];
    if (b !== undefined) {
      out.push(
        { name: `${p}_before_mb_per_s`, value: b.mbPerSecond, unit: "MB/s (the other build)" },
        {
          name: `${p}_before_primary_pause_ms`,
          value: b.pause.maxMs,
          unit: "ms (the other build)",
        },
        { name: `${p}_now_over_before`, value: s.mbPerSecond / b.mbPerSecond, unit: "ratio" },
        ...transferCpuMetrics(`${p}_before`, b),
      );
    }
  }
  return out;
}

/** CPU ms per MiB of each node's main thread and other threads (snapshot-cpu.ts). */
function transferCpuMetrics(prefix: string, s: SnapshotCatchUp): Metric[] {
  const c = s.transferCpu;
  if (c === undefined) return [];
  const unit = `CPU ms per MiB (10→90 %: ${c.mib.toFixed(0)} MiB in ${c.seconds.toFixed(2)} s)`;
  const top = (ms: number) => `${unit}; busiest one ${ms.toFixed(2)}`;
  return [
    { name: `${prefix}_primary_main_cpu_ms_per_mib`, value: c.primaryMainMsPerMiB, unit },
    {
      name: `${prefix}_primary_other_cpu_ms_per_mib`,
      value: c.primaryOtherMsPerMiB,
      unit: top(c.primaryTopOtherMsPerMiB),
    },
    { name: `${prefix}_standby_main_cpu_ms_per_mib`, value: c.standbyMainMsPerMiB, unit },
    {
      name: `${prefix}_standby_other_cpu_ms_per_mib`,
      value: c.standbyOtherMsPerMiB,
      unit: top(c.standbyTopOtherMsPerMiB),
    },
    {
      name: `${prefix}_standby_main_faults_per_page`,
      value: c.standbyMainFaultsPerPage,
      unit: "minor faults per 4 KiB page (10→90 %)",
    },
    {
      name: `${prefix}_standby_other_faults_per_page`,
      value: c.standbyOtherFaultsPerPage,
      unit: "minor faults per 4 KiB page (10→90 %; threads alive at 90 %)",
    },
  ];
}

export const SNAPSHOT_NOTE = `snapshot: fresh sync primary filled with non-zero buffers (fill kernel, 256 MiB each), standby started on a reserved port, knowing the primary's replication address (it pulls the pages: over the pages socket on that port, PullSnapshot with a build that has none); mb_per_s = status lastSnapshot bytes / seconds (the primary's clock, snapshot begun → last chunk acknowledged); primary_pause_ms = the longest wait of a guest issuing fences one at a time, each call clipped to [primary log "replication link up" (standby hello; the snapshot source is built on it), "snapshot completed"]; baseline = the same guest's longest call over ${SNAPSHOT_BASELINE_MS} ms before the standby started; source_build_ms = log time "replication link up" → "snapshot started" (ms resolution); catch_up_max_call_ms = the longest call answered after "snapshot completed": sync replies then wait until the standby applied the entries logged during the transfer (backlog = status lag at completion); *_cpu_ms_per_mib = CPU time of each node's main thread and of its other threads (device and lease threads, V8's and libuv's helpers; the busiest one in the unit) per MiB acknowledged between the primary's status polls at 10 % and 90 % of the bytes (the primary's include its guest's calls meanwhile); *_standby_{main,other}_faults_per_page = the standby threads' minor page faults per 4 KiB page over the same stretch (other: threads alive at both polls); CPU time, so steadier on a shared box than the rates; with BENCH_SNAPSHOT_BEFORE=REV|DIR each size also runs on that build's nodes just before (*_before_*)`;
