// A failover scenario file (YAML, see README.md) run on the failover simulator with no random
// faults: a list of steps — start, crash, pause, resume, partition, heal, switchover, send,
// advance — and expectations of the nodes' and the run's state between them. The simulator's
// Checker judges safety at every event, as in the random runs; `settle` heals everything and
// runs the final checks (one primary, equal replicas, the guests' history replayed).
import { DEFAULT_LEASE_TERMS, type LeaseTerms, type ReplicationMode } from "@vgpu-ha/common";
import { parse } from "yaml";
import type { FailoverParams, NodeName } from "../sim/failover/params.js";
import { FailoverSimulation } from "../sim/failover/simulation.js";
import type { FailoverStats } from "../sim/failover/stats.js";

export interface NodeExpectation {
  /** primary, standby, starting (probing its peer) or down (crashed). */
  readonly role?: "primary" | "standby" | "starting" | "down";
  /** running or paused (a crashed node is `role: down`). */
  readonly process?: "running" | "paused";
  /** The persisted epoch. */
  readonly epoch?: number;
  /** A primary's peer lease: leased, fenced, degraded. */
  readonly lease?: "leased" | "fenced" | "degraded";
  /**
   * A primary that may acknowledge now, judged as a release would (peer: leased or degraded;
   * etcd: its etcd lease holds by its own clock).
   */
  readonly serving?: boolean;
  /** A standby may take over (a granted replica). */
  readonly eligible?: boolean;
  /** A standby's receiver: empty, snapshot, replica, diverged. */
  readonly state?: "empty" | "snapshot" | "replica" | "diverged";
  /** A standby holds received entries until its primary's device has done them. */
  readonly holding?: boolean;
}

export interface Expectation {
  readonly a?: NodeExpectation;
  readonly b?: NodeExpectation;
  /** Any of the run's counters (see test/sim/failover/stats.ts), by exact value. */
  readonly stats?: Partial<Record<keyof FailoverStats, number>>;
  /** Guests whose session failed. */
  readonly guestsFailed?: number;
  /** etcd mode: who holds the leader key (null: nobody), and the record's named replica. */
  readonly etcd?: { readonly leader?: NodeName | null; readonly replica?: NodeName | "" };
}

export type Step =
  | { readonly start: NodeName | readonly NodeName[] }
  | { readonly crash: NodeName }
  | { readonly pause: NodeName }
  | { readonly resume: NodeName }
  /**
   * Cuts what `from` sends to its peer; `oneWay: false` (default) cuts both directions.
   * `kills: true`: the streams across die (keepalive timeouts, after about two leases) instead
   * of stalling until the cut heals.
   */
  | {
      readonly partition: {
        readonly from: NodeName;
        readonly oneWay?: boolean;
        readonly kills?: boolean;
      };
    }
  | { readonly heal: true }
  /** etcd mode: `node` loses etcd, or `both` (etcd is away); `etcdBack` ends every cut. */
  | { readonly etcdCut: NodeName | "both" }
  | { readonly etcdBack: true }
  /** A planned switchover on the primary; `refused` expects it to be refused. */
  | { readonly switchover: { readonly refused?: boolean } | true }
  /** The guests send the next N frames of the workload. */
  | { readonly send: number }
  /** Runs simulated time forward, in milliseconds. */
  | { readonly advance: number }
  | { readonly expect: Expectation }
  /** Heals everything and runs the final checks. */
  | { readonly settle: true };

export interface Scenario {
  readonly name: string;
  readonly description?: string;
  /** sync (default), sync-applied or async. */
  readonly ackMode?: ReplicationMode;
  /**
   * A node's simulated device (issue #14): each operation completes after latencyMs and, one
   * after another, serviceMs (each [min, max], default [0, 0]); a node not named runs inline.
   */
  readonly device?: Partial<
    Record<
      NodeName,
      {
        readonly latencyMs?: readonly [number, number];
        readonly serviceMs?: readonly [number, number];
      }
    >
  >;
  readonly lease?: Partial<LeaseTerms>;
  readonly initialEpoch?: Partial<Record<NodeName, number>>;
  /** Each node's clock rate (default 1). */
  readonly clockRate?: Partial<Record<NodeName, number>>;
  readonly guests?: { readonly sessions?: number; readonly frames?: number };
  /** lease.mode etcd with these terms (defaults as the daemon's). */
  readonly etcd?: {
    readonly ttlMs?: number;
    readonly keepaliveMs?: number;
    readonly pollMs?: number;
    readonly requestTimeoutMs?: number;
  };
  readonly seed?: number;
  readonly steps: readonly Step[];
}

export function parseScenario(text: string): Scenario {
  const s = parse(text) as Scenario;
  if (typeof s?.name !== "string" || !Array.isArray(s.steps)) {
    throw new Error("a scenario needs a name and a list of steps");
  }
  return s;
}

/** The deterministic parameters a scenario runs with: no link faults, exact clocks. */
export function scenarioParams(s: Scenario): FailoverParams {
  const lease = { ...DEFAULT_LEASE_TERMS, ...s.lease };
  const frames = s.guests?.frames ?? 60;
  return {
    seed: s.seed ?? 7,
    leaseMode: s.etcd ? "etcd" : "peer",
    etcd: s.etcd
      ? {
          ttlMs: s.etcd.ttlMs ?? 2000,
          keepaliveMs: s.etcd.keepaliveMs ?? 500,
          pollMs: s.etcd.pollMs ?? 100,
          requestTimeoutMs: s.etcd.requestTimeoutMs ?? 1000,
          latencyMs: [1, 1],
        }
      : undefined,
    ackMode: s.ackMode ?? "sync",
    device: Object.fromEntries(
      Object.entries(s.device ?? {}).map(([n, d]) => [
        n,
        {
          latencyMs: d.latencyMs ?? [0, 0],
          serviceMs: d.serviceMs ?? [0, 0],
          stallRate: 0,
          stallMs: 0,
        },
      ]),
    ),
    deviceFailure: undefined,
    mmio: "per-page",
    lease,
    clockRate: { a: 1, b: 1, ...s.clockRate },
    timerJitterMs: 0,
    initialEpoch: { a: 0, b: 0, ...s.initialEpoch },
    startMs: { a: 0, b: 0 },
    sender: {
      maxBatchEntries: 64,
      maxBatchBytes: 65536,
      maxInflightEntries: 1024,
      maxInflightBytes: 1 << 20,
      snapshotWindowChunks: 4,
      retransmitMs: lease.leaseMs,
      retainBytes: 1 << 20,
    },
    reconnectMs: Math.round(lease.leaseMs / 5),
    flushDelayMs: 1,
    flushBytes: 4096,
    snapshotChunkBytes: 16384,
    maxLagEntries: 200_000,
    network: {
      latencyMinMs: 1,
      latencyMaxMs: 1,
      dropRate: 0,
      dupRate: 0,
      reorderRate: 0,
      reorderMaxMs: 0,
      disconnectsPerSec: 0,
      reconnectMaxMs: 0,
    },
    guestLatencyMs: [1, 1],
    guests: {
      frames,
      sessions: s.guests?.sessions ?? 2,
      tenants: 1,
      invalidPercent: 0,
      windowFrames: 4,
      issueGapMs: 1,
      keepaliveMs: lease.leaseMs,
      connectTimeoutMs: 2 * lease.leaseMs,
      retryMaxMs: 50,
    },
    faultWindowMs: 0,
    faults: [],
    livenessBoundMs: Math.max(10_000, 40 * lease.leaseMs),
  };
}

/** What a node looks like now, in the terms of NodeExpectation. */
export function observe(sim: FailoverSimulation, name: NodeName): Required<NodeExpectation> {
  const node = sim.nodes[name];
  const proc = node.process();
  const p = node.primary;
  const s = node.standby;
  let role: Required<NodeExpectation>["role"] = p !== undefined ? "primary" : "standby";
  if (!node.decided) role = "starting";
  if (proc === undefined) role = "down";
  return {
    role,
    process: proc?.state === "paused" ? "paused" : "running",
    epoch: node.persistedEpoch,
    lease: p?.lease ?? ("-" as "leased"),
    serving: p !== undefined && p.effectiveLease() !== "fenced",
    eligible: s?.receiver.eligible ?? false,
    state: s?.receiver.state ?? ("-" as "empty"),
    holding: (s?.receiver.heldEntries ?? 0) > 0,
  };
}

/** Runs a scenario; throws (with the step and the state) at the first unmet expectation. */
export function runScenario(s: Scenario, onStep?: (line: string) => void): FailoverSimulation {
  const sim = new FailoverSimulation(scenarioParams(s), { autoIssue: false });
  sim.startGuests();
  for (const [i, step] of s.steps.entries()) {
    const where = `${s.name}, step ${i + 1} ${JSON.stringify(step)} at t=${sim.world.nowMs}ms`;
    onStep?.(where);
    try {
      apply(sim, step);
    } catch (e) {
      throw new Error(`${where}: ${(e as Error).message}\n  state: ${sim.describe()}`);
    }
  }
  return sim;
}

function apply(sim: FailoverSimulation, step: Step): void {
  if ("start" in step) {
    for (const n of typeof step.start === "string" ? [step.start] : step.start) sim.start(n);
  } else if ("crash" in step) sim.crash(step.crash);
  else if ("pause" in step) sim.pause(step.pause);
  else if ("resume" in step) sim.resume(step.resume);
  else if ("partition" in step)
    sim.partition(
      step.partition.from,
      step.partition.oneWay ?? false,
      step.partition.kills ?? false,
    );
  else if ("heal" in step) sim.healPartition();
  else if ("etcdCut" in step) sim.cutEtcd(step.etcdCut);
  else if ("etcdBack" in step) sim.healEtcd();
  else if ("switchover" in step) {
    const refusal = sim.switchover();
    const refused = step.switchover !== true && step.switchover.refused === true;
    if (refused !== (refusal !== undefined)) {
      throw new Error(
        refused ? "the switchover was not refused" : `switchover refused: ${refusal}`,
      );
    }
  } else if ("send" in step) sim.send(step.send);
  else if ("advance" in step) sim.advanceTo(sim.world.nowMs + step.advance);
  else if ("expect" in step) check(sim, step.expect);
  else if ("settle" in step) sim.settle();
  else throw new Error(`unknown step ${JSON.stringify(step)}`);
}

function check(sim: FailoverSimulation, e: Expectation): void {
  const wrong: string[] = [];
  for (const name of ["a", "b"] as const) {
    const want = e[name];
    if (want === undefined) continue;
    const seen = observe(sim, name);
    for (const [key, value] of Object.entries(want)) {
      const got = seen[key as keyof NodeExpectation];
      if (got !== value) wrong.push(`${name}.${key} is ${got}, expected ${value}`);
    }
  }
  for (const [key, value] of Object.entries(e.stats ?? {})) {
    const got = sim.stats[key as keyof FailoverStats];
    if (got === undefined) wrong.push(`unknown counter ${key}`);
    else if (got !== value) wrong.push(`stats.${key} is ${got}, expected ${value}`);
  }
  if (e.guestsFailed !== undefined) {
    const failed = sim.guests.filter((g) => g.failure !== undefined).length;
    if (failed !== e.guestsFailed)
      wrong.push(`${failed} guests failed, expected ${e.guestsFailed}`);
  }
  if (e.etcd !== undefined) {
    const leader = sim.etcd?.leaderNow?.nodeId ?? null;
    if (e.etcd.leader !== undefined && leader !== e.etcd.leader) {
      wrong.push(`the leader key is ${leader}'s, expected ${e.etcd.leader}'s`);
    }
    const replica = sim.etcd?.recordNow?.replica;
    if (e.etcd.replica !== undefined && replica !== e.etcd.replica) {
      wrong.push(
        `the record names ${JSON.stringify(replica)}, expected ${JSON.stringify(e.etcd.replica)}`,
      );
    }
  }
  if (wrong.length > 0) throw new Error(wrong.join("; "));
}
