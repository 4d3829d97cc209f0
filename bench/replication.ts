// Replication benchmark (DESIGN §11), real processes over loopback, side by side in one run:
//   modes     standalone vs async vs sync: pipelined small calls from 8 sessions, sequential
//             call latency, pipelined 64 KiB DMA writes
//   mmio      per-store vs per-page MMIO replication (sync mode, through a byte-counting
//             proxy): entries, bytes on the wire and stores/s for the same store streams
//   snapshot  a fresh standby catching up from 256 MiB and 1 GiB of buffers: rate, and the
//             longest call a guest of the primary saw meanwhile
//   raw       a plain Node TCP pump between two processes: the physical reference
//   retain    the retained log's heap at its replication.retainBytes cap (in process)
//   compute   gemm 256³ + 256 KiB readback, serial and pipelined, standalone vs every mode (#14)
//   heavy     a 1 GiB fill and a gemm at maxKernelWork under another tenant's small calls (#14)
//   resync    a standby restarted empty while a guest loads the primary: time to eligible and
//             the primary's longest reply stall after the snapshot (#14)
//   before    standalone and sync small calls against another build (--before REV|DIR) (#14)
// and whether the pairs stayed pairs (lease lapses, promotions, step-downs in their logs).
// `--phase modes,mmio,…` (or BENCH_PHASES=…) runs a subset (written as replication-<phases>.json);
// BENCH_ROUNDS=N sets the rounds of compute and before (a quick check: 1);
// BENCH_MODES_WORKLOADS=dma (or calls, dma, latency) runs only those workloads of modes
// (written as replication-modes-dma.json);
// BENCH_SNAPSHOT_SIZES=256m runs only that snapshot size (a quick look; default 256m,1g);
// BENCH_SNAPSHOT_BEFORE=REV|DIR also runs each snapshot size with that build's nodes, just before;
// BENCH_PROFILE_DIR=DIR also writes a CPU profile per node and phase (see cpu-profile.ts);
// BENCH_LEASE_MS=N runs the pairs on an N ms lease (replication-…-leaseN.json);
// BENCH_KEEP_LOGS=1 keeps every node's directory and log.
import os from "node:os";
import path from "node:path";
import { leaseOverride } from "./cluster.js";
import { formatSummary, profileRoot, summarizeProfile } from "./cpu-profile.js";
import { leaseEventTally } from "./lease-events.js";
import { PIN_NOTE } from "./pinning.js";
import { rawTcp } from "./raw-tcp.js";
import { BEFORE_NOTE, beforeMetrics, DEFAULT_BEFORE, measureBefore } from "./replication-before.js";
import { COMPUTE_NOTE, computeMetrics, measureCompute } from "./replication-compute.js";
import { HEAVY_NOTE, heavyMetrics, measureHeavy } from "./replication-heavy.js";
import { MMIO_NOTE, measureMmioModes } from "./replication-mmio.js";
import { MODES_NOTE, measureModes, modeMetrics, modesWorkloads } from "./replication-modes.js";
import { measureResync, RESYNC_NOTE, resyncMetrics } from "./replication-resync.js";
import { measureRetain, RETAIN_NOTE, retainMetrics } from "./replication-retain.js";
import { measureSnapshots, SNAPSHOT_NOTE, snapshotMetrics } from "./replication-snapshot.js";
import { type Metric, publish } from "./report.js";

const GiB = 2 ** 30;

const PHASES = [
  "raw",
  "modes",
  "mmio",
  "snapshot",
  "retain",
  "compute",
  "heavy",
  "resync",
  "before",
] as const;
type Phase = (typeof PHASES)[number];

export interface ReplicationOptions {
  /** Phases to run (BENCH_PHASES when left out; all when neither). */
  readonly phases?: readonly string[];
  /** The build the `before` phase compares with: a git revision or a built checkout. */
  readonly before?: string;
}

/** Pairs whose lease trouble is what their phase measures, or that run a lease of their own. */
const OWN_LEASE_ACCOUNT = ["mmio-", "heavy-", "resync-"];

const RAW_TCP_BYTES = GiB;

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

function selectedPhases(given: readonly string[] | undefined): Set<Phase> {
  const env = process.env.BENCH_PHASES;
  if (given === undefined && (env === undefined || env === "")) return new Set(PHASES);
  const chosen = given ?? env!.split(",").map((p) => p.trim());
  for (const p of chosen) {
    if (!(PHASES as readonly string[]).includes(p)) throw new Error(`unknown phase ${p}`);
  }
  return new Set(chosen as Phase[]);
}

export async function runReplication(options: ReplicationOptions = {}): Promise<void> {
  const phases = selectedPhases(options.phases);
  const loadBefore = os.loadavg();
  const startedMs = performance.now();
  const profiles: string[] = [];
  const metrics: Metric[] = [];
  const data: Record<string, unknown> = {};

  let rawMbPerSecond: number | undefined;
  let rawFreshMbPerSecond: number | undefined;
  const rawRuns: number[] = [];
  const rawFreshRuns: number[] = [];
  const raw = async () => {
    const r = await rawTcp(RAW_TCP_BYTES);
    rawRuns.push(r.mbPerSecond);
    const f = await rawTcp(RAW_TCP_BYTES, true);
    rawFreshRuns.push(f.mbPerSecond);
    console.log(
      `  raw tcp: ${Math.round(r.mbPerSecond)} MB/s; into fresh memory ${Math.round(f.mbPerSecond)} MB/s`,
    );
  };
  if (phases.has("raw")) await raw();

  if (phases.has("modes")) {
    console.log("modes: standalone, async, sync");
    const modes = await measureModes(profiles);
    metrics.push(...modeMetrics(modes));
    data.modes = modes;
  }

  if (phases.has("mmio")) {
    console.log("mmio: per-store vs per-page (sync)");
    const mmio = await measureMmioModes(profiles);
    metrics.push(...mmio.metrics);
    data.mmio = mmio.data;
  }

  if (phases.has("raw")) await raw();
  if (rawRuns.length > 0) {
    rawMbPerSecond = mean(rawRuns);
    rawFreshMbPerSecond = mean(rawFreshRuns);
    metrics.push(
      { name: "raw_tcp_mb_per_s", value: rawMbPerSecond, unit: "MB/s (1e6 B)" },
      {
        name: "raw_tcp_fresh_mb_per_s",
        value: rawFreshMbPerSecond,
        unit: "MB/s (1e6 B; the sink copies into fresh memory)",
      },
    );
    data.rawTcp = {
      bytesPerRun: RAW_TCP_BYTES,
      mbPerSecondRuns: rawRuns,
      freshMbPerSecondRuns: rawFreshRuns,
    };
  }

  if (phases.has("snapshot")) {
    console.log("snapshot: fresh standby catching up");
    const snapshots = await measureSnapshots(profiles);
    metrics.push(...snapshotMetrics(snapshots, rawMbPerSecond, rawFreshMbPerSecond));
    data.snapshot = snapshots;
  }

  if (phases.has("retain")) {
    console.log("retain: the retained log at its cap (in process)");
    const retain = measureRetain();
    console.log(
      `  ${retain.heapMbAtCap.toFixed(0)} MiB heap for ${retain.budgetMb} MiB retainBytes`,
    );
    metrics.push(...retainMetrics(retain));
    data.retain = retain;
  }

  if (phases.has("compute")) {
    console.log("compute: gemm 256 + 256 KiB readback, standalone vs each mode");
    const compute = await measureCompute();
    metrics.push(...computeMetrics(compute));
    data.compute = compute;
  }

  if (phases.has("heavy")) {
    console.log("heavy: a 1 GiB fill and a gemm at maxKernelWork beside another tenant's calls");
    const heavy = await measureHeavy();
    metrics.push(...heavyMetrics(heavy));
    data.heavy = heavy;
  }

  if (phases.has("resync")) {
    console.log("resync: the standby restarted empty while guests load the primary");
    const resync = await measureResync();
    metrics.push(...resyncMetrics(resync));
    data.resync = resync;
  }

  if (phases.has("before")) {
    const before = options.before ?? process.env.BENCH_BEFORE ?? DEFAULT_BEFORE;
    console.log(`before: small calls, this build against ${before}`);
    const r = await measureBefore(before);
    metrics.push(...beforeMetrics(r));
    data.before = r;
  }

  const leaseEvents = [...leaseEventTally()];
  // The mmio pairs run on a lease of their own (replication-mmio.ts), the heavy and resync
  // pairs report their lease trouble as their own metrics: counted apart, in data.
  const onRunLease = leaseEvents.filter(
    ([label]) => !OWN_LEASE_ACCOUNT.some((prefix) => label.startsWith(prefix)),
  );
  metrics.push({
    name: "lease_events",
    value: onRunLease.reduce((n, [, e]) => n + e.lapses + e.promotions + e.stepDowns, 0),
    unit: "lapses+promotions+step-downs in logs (modes, snapshot, compute, before pairs)",
    target: { kind: "atMost", value: 0, note: "pairs stayed pairs" },
  });
  metrics.push({
    name: "lease_fenced_ms",
    value: onRunLease.reduce((n, [, e]) => n + e.fencedMs, 0),
    unit: `ms replies held (longest ${Math.max(0, ...onRunLease.map(([, e]) => e.longestFencedMs))} ms)`,
  });
  data.leaseEvents = Object.fromEntries(leaseEvents);
  data.loadAverage = { before: loadBefore, after: os.loadavg() };
  data.wallSeconds = (performance.now() - startedMs) / 1000;
  if (profiles.length > 0) {
    data.profiles = Object.fromEntries(
      [...groupProfiles(profiles)].map(([k, files]) => [k, summarizeProfile(files, 12)]),
    );
  }
  const all = phases.size === PHASES.length;
  const lease = leaseOverride();
  const workloads = phases.has("modes") ? [...modesWorkloads()] : [];
  const partOfModes = workloads.length > 0 && workloads.length < 3 ? `-${workloads.join("-")}` : "";
  publish({
    name: `replication${all ? "" : `-${[...phases].join("-")}`}${partOfModes}${lease ? `-lease${lease.durationMs}` : ""}`,
    metrics,
    ratios: Object.fromEntries(
      metrics.filter((m) => m.unit === "ratio").map((m) => [m.name, m.value]),
    ),
    notes: notes(loadBefore, data.wallSeconds as number, phases),
    data,
  });
  if (profiles.length > 0) {
    console.log(`\nCPU profiles under ${profileRoot()}:`);
    for (const [k, files] of groupProfiles(profiles)) {
      console.log(formatSummary(summarizeProfile(files, 12), `${k} (${files.length})`));
    }
  }
}

/** Profiles by node label and phase, the rounds of a phase together. */
function groupProfiles(files: readonly string[]): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  for (const f of files) {
    const key = `${path.basename(path.dirname(f))} ${path.basename(f, ".cpuprofile").replace(/-round\d+$/, "")}`;
    groups.set(key, [...(groups.get(key) ?? []), f]);
  }
  return groups;
}

function notes(loadBefore: number[], wallSeconds: number, phases: Set<Phase>): string[] {
  const phaseNotes: Record<Phase, string> = {
    raw: RAW_TCP_NOTE,
    modes: MODES_NOTE,
    mmio: MMIO_NOTE,
    snapshot: SNAPSHOT_NOTE,
    retain: RETAIN_NOTE,
    compute: COMPUTE_NOTE,
    heavy: HEAVY_NOTE,
    resync: RESYNC_NOTE,
    before: BEFORE_NOTE,
  };
  return [
    `${os.cpus().length} cores shared by the benchmark client, every node (primary, standby), the counting proxy and anything else running on the machine; load average at start ${loadBefore.map((l) => l.toFixed(2)).join(" ")}; the *_cpu_* rows give client/node/standby CPU and the whole machine's busy CPU (of ${os.cpus().length * 100} %) while measuring`,
    ...PHASES.filter((p) => phases.has(p)).map((p) => phaseNotes[p]),
    `whole run ${wallSeconds.toFixed(0)} s`,
    ...PIN_NOTE(),
    ...(leaseOverride()
      ? [`BENCH_LEASE_MS: every pair ran with lease ${JSON.stringify(leaseOverride())}`]
      : []),
  ];
}

const RAW_TCP_NOTE = `raw_tcp: ${RAW_TCP_BYTES / GiB} GiB in 1 MiB writes over one loopback TCP connection between two forked node processes, first to last byte at the sink; raw_tcp_fresh: the same, the sink copying every byte read into one fresh SharedArrayBuffer of ${RAW_TCP_BYTES / GiB} GiB (the least a fresh standby does: its VRAM is memory it never touched, mapped page by page on first touch); each run at the start and after the mmio phase, value = mean; under BENCH_PIN_CORES each end pinned to its own cores as a node is`;
