// The compute-bound phase (#14): gemm_f32 256×256×256 plus a 256 KiB readback of its result
// per iteration, serial (one iteration in flight: the launch and the read sent together,
// awaited together) and pipelined (PIPELINE_DEPTH iterations in flight, each its own C), for a
// standalone node and pairs in every replication mode this build's config accepts (async,
// sync, and sync-applied once ack-modes adds it). All set-ups run side by side; rounds visit
// them in rotating order (rounds.ts). Iterations/s are medians of rounds, ratios to standalone
// medians of per-round ratios; CPU of the client and of each node while measuring.

import { buf, u32 } from "@vgpu-ha/client";
import type { KernelArg } from "@vgpu-ha/common";
import {
  acceptsMode,
  type Cluster,
  type ReplicationMode,
  startPair,
  startStandalone,
} from "./cluster.js";
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
          const m = await measure(cluster, depth);
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

export function computeMetrics(r: ComputeResult): Metric[] {
  const out: Metric[] = [];
  const base = r.rounds.standalone;
  for (const [name, kinds] of Object.entries(r.rounds) as [SetupName, Record<Kind, Measured[]>][]) {
    for (const kind of KINDS) {
      const ms = kinds[kind];
      const cpu = (pick: (m: Measured) => number) => median(ms.map(pick)).toFixed(0);
      const standby = name === "standalone" ? "" : `, standby ${cpu((m) => m.nodePcts[1]!)} %`;
      // Figures of a pair that failed over while measured are not the mode's: say so.
      const lease = leaseEventTally().get(`compute-${name}`);
      const broken =
        lease !== undefined && lease.lapses + lease.promotions + lease.stepDowns > 0
          ? `; PAIR NOT WHOLE: lapses ${lease.lapses}, promotions ${lease.promotions}, step-downs ${lease.stepDowns}`
          : "";
      out.push({
        name: `compute_${name}_iter_per_s_${kind}`,
        value: median(ms.map((m) => m.perSecond)),
        unit: `iter/s (median of ${ms.length}; CPU client ${cpu((m) => m.clientPct)} %, node ${cpu((m) => m.nodePcts[0]!)} %${standby}, machine ${cpu((m) => m.machinePct)} % of 200${broken})`,
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
  }
  return out;
}

export const COMPUTE_NOTE = `compute: gemm_f32 ${SIZE}x${SIZE}x${SIZE} + a ${MATRIX_BYTES / 1024} KiB dmaRead of its result per iteration; serial = one iteration in flight (launch and read sent together), pipelined = ${PIPELINE_DEPTH} in flight (each its own C); one session; standalone and a pair per replication mode the config accepts, side by side, ${ROUNDS} rounds of ${DURATIONS.warmupMs} ms warm-up + ${DURATIONS.measureMs} ms per kind, set-ups in rotating order; iter/s medians of rounds, *_over_standalone_* medians of per-round ratios; *_own_cores_bound_pipelined = standalone's busiest process CPU s/iteration over the mode's (client, primary, standby): the ratio to expect when each process has a core of its own (two hosts) and CPU, not the wire, bounds the pipeline`;
