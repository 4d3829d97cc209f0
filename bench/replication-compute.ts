// The compute-bound phase (#14): gemm_f32 256×256×256 plus a 256 KiB readback of its result
// per iteration, serial (one iteration in flight: the launch and the read sent together,
// awaited together) and pipelined (PIPELINE_DEPTH iterations in flight, each its own C), for a
// standalone node and pairs in every replication mode this build's config accepts (async,
// sync, and sync-applied once ack-modes adds it). All set-ups run side by side; rounds visit
// them in rotating order (rounds.ts). Iterations/s are medians of rounds, ratios to standalone
// medians of per-round ratios; CPU of the client and of each node (main and device thread)
// while measuring, and two CPU models from them: own cores (each thread a core of its own, as
// on two hosts) and this machine's cores (every process sharing them). With BENCH_PROFILE_DIR,
// each measured stretch leaves a CPU profile of every node's main thread (cpu-profile.ts).

import os from "node:os";
import { buf, u32 } from "@vgpu-ha/client";
import type { KernelArg } from "@vgpu-ha/common";
import {
  acceptsMode,
  type Cluster,
  type ReplicationMode,
  startPair,
  startStandalone,
} from "./cluster.js";
import { profilePhase } from "./cpu-profile.js";
import { floats } from "./gpu-model.js";
import {
  type Client,
  type CpuUse,
  type Durations,
  pipelined,
  withClients,
} from "./guest-workload.js";
import { leaseEventTally } from "./lease-events.js";
import type { Metric } from "./report.js";
import { inRounds, medianRatio, roundsFromEnv } from "./rounds.js";
import { median } from "./timing.js";

const SIZE = 256;
const MATRIX_BYTES = SIZE * SIZE * 4;
const PIPELINE_DEPTH = 4;
const ROUNDS = roundsFromEnv(3);
const DURATIONS: Durations = { warmupMs: 300, measureMs: 2000 };
const WARM_UP: Durations = { warmupMs: 300, measureMs: 300 };
const TARGET_RATIO = 0.85;

/** JSON names of the set-ups: the replication mode with `_` for `-`. */
type SetupName = "standalone" | "async" | "sync" | "sync_applied";
const PAIR_MODES: readonly [SetupName, ReplicationMode][] = [
  ["async", "async"],
  ["sync", "sync"],
  ["sync_applied", "sync-applied"],
];
const KINDS = ["serial", "pipelined"] as const;
type Kind = (typeof KINDS)[number];

type Measured = CpuUse & { perSecond: number };
export type ComputeRounds = Partial<Record<SetupName, Record<Kind, Measured[]>>>;

export interface ComputeResult {
  readonly rounds: ComputeRounds;
  /** Modes this build's config refused (not measured), e.g. sync-applied before ack-modes. */
  readonly notAccepted: readonly string[];
}

/** gemm into slot i mod depth and read it back, both frames sent at once. */
async function iterate(c: Client, a: number, b: number, cs: readonly number[], i: number) {
  const out = cs[i % cs.length]!;
  const args: KernelArg[] = [buf(out), buf(a), buf(b), u32(SIZE), u32(SIZE), u32(SIZE)];
  await Promise.all([
    c.session.launch(c.context, "gemm_f32", args),
    c.session.dmaRead(c.context, out, 0, MATRIX_BYTES),
  ]);
}

function measure(cluster: Cluster, depth: number, durations = DURATIONS): Promise<Measured> {
  return withClients(cluster.primary.guest, 1, async ([c]) => {
    const { session, context } = c!;
    const a = await session.allocBo(context, MATRIX_BYTES);
    const b = await session.allocBo(context, MATRIX_BYTES);
    await session.dmaWrite(context, a, 0, floats(SIZE * SIZE, 1));
    await session.dmaWrite(context, b, 0, floats(SIZE * SIZE, 2));
    const cs: number[] = [];
    for (let i = 0; i < depth; i++) cs.push(await session.allocBo(context, MATRIX_BYTES));
    return pipelined(cluster.nodes, [c!], depth, durations, (_, i) => iterate(c!, a, b, cs, i));
  });
}

export async function measureCompute(): Promise<ComputeResult> {
  const clusters = new Map<SetupName, Cluster>();
  const notAccepted = PAIR_MODES.filter(([, mode]) => !acceptsMode(mode)).map(([, m]) => m);
  if (notAccepted.length > 0) {
    console.log(`  not accepted by this build's config (not measured): ${notAccepted.join(", ")}`);
  }
  try {
    clusters.set("standalone", await startStandalone("compute-standalone"));
    for (const [name, mode] of PAIR_MODES) {
      if (acceptsMode(mode))
        clusters.set(name, await startPair({ label: `compute-${name}`, mode }));
    }
    const rounds: ComputeRounds = {};
    for (const kind of KINDS) {
      const depth = kind === "serial" ? 1 : PIPELINE_DEPTH;
      const byName = await inRounds(
        clusters,
        ROUNDS,
        async (name, cluster, round) => {
          const phase = `compute-${name}-${kind}-round${round + 1}`;
          const { result: m } = await profilePhase(cluster.nodes, phase, () =>
            measure(cluster, depth),
          );
          console.log(`  ${name} ${kind} round ${round + 1}: ${m.perSecond.toFixed(1)} iter/s`);
          return m;
        },
        (_, cluster) => measure(cluster, depth, WARM_UP),
      );
      for (const [name, ms] of Object.entries(byName) as [SetupName, Measured[]][]) {
        rounds[name] = { ...(rounds[name] ?? { serial: [], pipelined: [] }), [kind]: ms };
      }
    }
    return { rounds, notAccepted };
  } finally {
    for (const c of clusters.values()) await c.stop();
  }
}

/** CPU seconds of the busiest process (client or a node) per iteration. */
const busiestSecondsPerIter = (m: Measured) =>
  Math.max(m.clientPct, ...m.nodePcts) / 100 / m.perSecond;

/** CPU seconds of the busiest thread (the client's process, a node's main or device thread) per iteration. */
const busiestThreadSecondsPerIter = (m: Measured) =>
  Math.max(m.clientPct, ...m.nodeThreads.flatMap((t) => [t.mainPct, t.devicePct])) /
  100 /
  m.perSecond;

/** CPU seconds of the client and every node together per iteration. */
const totalSecondsPerIter = (m: Measured) =>
  (m.clientPct + m.nodePcts.reduce((a, b) => a + b, 0)) / 100 / m.perSecond;

const CORES = os.cpus().length;

/** "main 40 % + device 60 %" for one node: its threads' medians over rounds. */
function threadsNote(ms: readonly Measured[], node: number): string {
  const pct = (pick: (m: Measured) => number) => median(ms.map(pick)).toFixed(0);
  return `main ${pct((m) => m.nodeThreads[node]!.mainPct)} % + device ${pct((m) => m.nodeThreads[node]!.devicePct)} % + other ${pct((m) => m.nodeThreads[node]!.otherPct)} %`;
}

export function computeMetrics(r: ComputeResult): Metric[] {
  const out: Metric[] = [];
  const base = r.rounds.standalone;
  for (const [name, kinds] of Object.entries(r.rounds) as [SetupName, Record<Kind, Measured[]>][]) {
    for (const kind of KINDS) {
      const ms = kinds[kind];
      const cpu = (pick: (m: Measured) => number) => median(ms.map(pick)).toFixed(0);
      const standby =
        name === "standalone"
          ? ""
          : `, standby ${cpu((m) => m.nodePcts[1]!)} % (${threadsNote(ms, 1)})`;
      // Figures of a pair that failed over while measured are not the mode's: say so.
      const lease = leaseEventTally().get(`compute-${name}`);
      const broken =
        lease !== undefined && lease.lapses + lease.promotions + lease.stepDowns > 0
          ? `; PAIR NOT WHOLE: lapses ${lease.lapses}, promotions ${lease.promotions}, step-downs ${lease.stepDowns}`
          : "";
      out.push({
        name: `compute_${name}_iter_per_s_${kind}`,
        value: median(ms.map((m) => m.perSecond)),
        unit: `iter/s (median of ${ms.length}; CPU client ${cpu((m) => m.clientPct)} %, node ${cpu((m) => m.nodePcts[0]!)} % (${threadsNote(ms, 0)})${standby}, machine ${cpu((m) => m.machinePct)} % of ${CORES * 100}${broken})`,
      });
    }
  }
  for (const [name, kinds] of Object.entries(r.rounds) as [SetupName, Record<Kind, Measured[]>][]) {
    if (name === "standalone" || base === undefined) continue;
    for (const kind of KINDS) {
      const perSecond = (ms: Measured[]) => ms.map((m) => m.perSecond);
      out.push({
        name: `compute_${name}_over_standalone_${kind}`,
        value: medianRatio(perSecond(kinds[kind]), perSecond(base[kind])),
        unit: "ratio",
        ...(name === "sync_applied"
          ? {}
          : { target: { kind: "atLeast" as const, value: TARGET_RATIO, note: "#14" } }),
      });
    }
    const own = medianRatio(
      base.pipelined.map(busiestSecondsPerIter),
      kinds.pipelined.map(busiestSecondsPerIter),
    );
    out.push({
      name: `compute_${name}_own_cores_bound_pipelined`,
      value: own,
      unit: "ratio (model: each process on a core of its own; see note)",
    });
    for (const kind of KINDS) {
      out.push({
        name: `compute_${name}_own_cores_thread_bound_${kind}`,
        value: medianRatio(
          base[kind].map(busiestThreadSecondsPerIter),
          kinds[kind].map(busiestThreadSecondsPerIter),
        ),
        unit: "ratio (model: each thread on a core of its own, as on two hosts; see note)",
      });
      out.push({
        name: `compute_${name}_machine_cores_bound_${kind}`,
        value: medianRatio(
          kinds[kind].map((m) =>
            Math.min(CORES / totalSecondsPerIter(m), 1 / busiestThreadSecondsPerIter(m)),
          ),
          base[kind].map((m) => m.perSecond),
        ),
        unit: `ratio (model: client and nodes sharing this machine's ${CORES} cores; see note)`,
      });
    }
  }
  return out;
}

export const COMPUTE_NOTE = `compute: gemm_f32 ${SIZE}x${SIZE}x${SIZE} + a ${MATRIX_BYTES / 1024} KiB dmaRead of its result per iteration; serial = one iteration in flight (launch and read sent together), pipelined = ${PIPELINE_DEPTH} in flight (each its own C); one session; standalone and a pair per replication mode the config accepts, side by side, ${ROUNDS} rounds of ${DURATIONS.warmupMs} ms warm-up + ${DURATIONS.measureMs} ms per kind, set-ups in rotating order; iter/s medians of rounds, *_over_standalone_* medians of per-round ratios; *_own_cores_bound_pipelined = standalone's busiest process CPU s/iteration over the mode's (client, primary, standby): the ratio to expect when each process has a core of its own and CPU, not the wire, bounds the pipeline; *_own_cores_thread_bound_* = the same by thread (the client process, each node's main thread and its device thread, the busiest thread other than the main one, from /proc/PID/task): what two hosts with a core per thread reach; *_machine_cores_bound_* = min(${CORES} cores / the CPU seconds the client and its nodes used per iteration, 1 / the busiest thread's) over standalone's iter/s: the most the set-up could do on this machine's cores if nothing else ran, so a measured ratio near it is bound by CPU`;
