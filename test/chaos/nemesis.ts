// The nemesis: a seeded schedule of faults (a pure function of the seed and the chosen kinds,
// printed before the run), executed one at a time: each waits until the pair is healthy again
// (a primary streaming to a replica) and a seeded quiet time has passed. With "restart", a node
// that died is started again after a seeded delay, as systemd would (Restart=always,
// RestartSec); it rejoins with its persisted epoch. Times are measured on the harness's clock.
import { Rng } from "@vgpu-ha/gpu-model/testing";
import type { Cluster } from "./cluster.js";
import type { Ack } from "./history.js";
import { type Hosts, type LinkDegradation, type NodeName, peerOf } from "./hosts.js";
import type { Monitor } from "./monitor.js";
import type { FaultKind } from "./options.js";

export type Fault = Exclude<FaultKind, "restart">;

export interface PlannedFault {
  readonly index: number;
  readonly kind: Fault;
  /** Quiet time before the fault, once the pair is healthy. */
  readonly quietMs: number;
  /** How long a pause, partition or degradation lasts. */
  readonly holdMs: number;
  /** partition: whose packets are dropped (the primary's, the standby's, or both ways). */
  readonly side?: "both" | "primary" | "standby";
  readonly degrade?: LinkDegradation;
  /** RestartSec for a node the fault kills. */
  readonly restartDelayMs: number;
}

/**
 * The schedule: rounds, each a seeded shuffle of the chosen kinds (so every kind recurs
 * evenly), `count` faults in all. Parameters are drawn from the lease so that pauses outlast
 * it and partitions are sometimes shorter (a blip), sometimes much longer.
 */
export function planFaults(
  seed: number,
  kinds: readonly FaultKind[],
  count: number,
  leaseMs: number,
): PlannedFault[] {
  const rng = new Rng(seed);
  const active = kinds.filter((k): k is Fault => k !== "restart");
  const plan: PlannedFault[] = [];
  while (plan.length < count) {
    const round = [...active];
    for (let i = round.length - 1; i > 0; i--) {
      const j = rng.below(i + 1);
      [round[i], round[j]] = [round[j]!, round[i]!];
    }
    for (const kind of round) {
      if (plan.length >= count) break;
      plan.push(planOne(rng, plan.length, kind, leaseMs));
    }
  }
  return plan;
}

function planOne(rng: Rng, index: number, kind: Fault, leaseMs: number): PlannedFault {
  const base = {
    index,
    kind,
    quietMs: rng.between(500, 2500),
    restartDelayMs: rng.between(300, 2000),
  };
  switch (kind) {
    case "pause":
      return { ...base, holdMs: rng.between(2 * leaseMs, 6 * leaseMs) };
    case "partition":
      return {
        ...base,
        holdMs: rng.chance(25)
          ? rng.between(leaseMs / 5, leaseMs / 2)
          : rng.between(2 * leaseMs, 8 * leaseMs),
        side: rng.pick(["both", "primary", "standby"] as const),
      };
    case "netem":
      return {
        ...base,
        holdMs: rng.between(2000, 6000),
        degrade: {
          delayMs: rng.between(2, 40),
          jitterMs: rng.between(0, 20),
          lossPercent: rng.between(0, 5),
          rateKbit: rng.pick([512, 1024, 2048, 4096]),
          queueMs: rng.between(20, 200),
        },
      };
    default:
      return { ...base, holdMs: 0 };
  }
}

export function describePlan(p: PlannedFault): string {
  const hold = `${(p.holdMs / 1000).toFixed(2)} s`;
  switch (p.kind) {
    case "kill":
      return `SIGKILL the primary (restart after ${p.restartDelayMs} ms)`;
    case "kill-standby":
      return `SIGKILL the standby (restart after ${p.restartDelayMs} ms)`;
    case "pause":
      return `SIGSTOP the primary for ${hold}, then SIGCONT`;
    case "partition":
      return `partition ${p.side === "both" ? "both ways" : `one way (the ${p.side}'s packets dropped)`} for ${hold}`;
    case "netem": {
      const d = p.degrade!;
      return `degrade the link for ${hold}: delay ${d.delayMs} ms ± ${d.jitterMs} ms, loss ${d.lossPercent} % (no netem: tbf ${d.rateKbit} kbit, queue ${d.queueMs} ms)`;
    }
  }
}

/** What happened to one planned fault. */
export interface FaultRecord {
  readonly plan: PlannedFault;
  readonly description: string;
  /** The node it hit and that node's role then. */
  target?: NodeName;
  targetRole?: "primary" | "standby";
  /** Epoch of the primary before the fault. */
  epochBefore?: number;
  startMs?: number;
  /** When the fault was undone (SIGCONT, heal, restore, restart). */
  endMs?: number;
  /** What was applied, in words (e.g. the tc command's effect). */
  applied?: string;
  /** First acknowledgement of a higher epoch after the fault, and whose. */
  failoverMs?: number;
  newPrimary?: string;
  newEpoch?: number;
  /** When the pair was healthy again (primary streaming to a replica). */
  recoveredMs?: number;
  skipped?: string;
  errors: string[];
}

export interface NemesisOptions {
  readonly cluster: Cluster;
  readonly hosts: Hosts;
  readonly monitor: Monitor;
  readonly acks: readonly Ack[];
  readonly restart: boolean;
  readonly now: () => number;
  /** The pair must be healthy again within this after each fault. */
  readonly recoverTimeoutMs: number;
  readonly log: (msg: string) => void;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class Nemesis {
  readonly records: FaultRecord[] = [];
  private stopped = false;
  private readonly restarts = new Set<Promise<void>>();
  private readonly restarting = new Set<NodeName>();
  private healedAtMs = 0;
  /** A liveness failure: the pair did not recover in time (then no further fault). */
  stuck: string | undefined;

  constructor(private readonly o: NemesisOptions) {}

  /** Stops before the next fault (a fault in progress completes). */
  stop(): void {
    this.stopped = true;
  }

  async run(plan: readonly PlannedFault[], untilMs: number): Promise<void> {
    for (const p of plan) {
      if (this.stopped || this.o.now() >= untilMs) return;
      const record: FaultRecord = { plan: p, description: describePlan(p), errors: [] };
      const primary = await this.waitHealthy();
      this.markRecovered();
      if (this.stopped) return;
      if (primary === undefined) {
        const down = (["a", "b"] as const).filter((n) => this.o.cluster.state(n) === "down");
        this.stuck =
          !this.o.restart && down.length > 0
            ? undefined
            : `the pair was not healthy within ${this.o.recoverTimeoutMs / 1000} s after the previous fault`;
        if (this.stuck === undefined) {
          record.skipped = `node ${down.join(",")} is down and restart is not among the faults`;
          this.records.push(record);
          while (!this.stopped && this.o.now() < untilMs) await sleep(200);
        }
        return;
      }
      await sleep(p.quietMs);
      if (this.stopped || this.o.now() >= untilMs) return;
      this.records.push(record);
      try {
        await this.execute(record, primary);
      } catch (e) {
        record.errors.push((e as Error).message);
      }
    }
  }

  /** Waits until the pair is healthy; the primary's name, or undefined after the timeout. */
  async waitHealthy(): Promise<NodeName | undefined> {
    const deadline = this.o.now() + this.o.recoverTimeoutMs;
    while (this.o.now() < deadline && !this.stopped) {
      const p = this.o.monitor.healthyPrimary(this.notBeforeMs());
      if (p !== undefined) return p;
      // A node that died on its own is restarted too, as systemd would.
      for (const n of ["a", "b"] as const) {
        if (this.o.restart && this.o.cluster.state(n) === "down" && !this.restarting.has(n)) {
          const last = this.records.at(-1);
          this.restartLater(n, 1000, last);
        }
      }
      await sleep(50);
    }
    return this.o.monitor.healthyPrimary(this.notBeforeMs());
  }

  /** Statuses from before the last fault was undone say nothing about recovery. */
  private notBeforeMs(): number {
    const last = this.records.at(-1);
    return Math.max(last?.endMs ?? 0, last?.startMs ?? 0, this.healedAtMs);
  }

  /** Sets recoveredMs on the last fault once the pair is healthy again. */
  markRecovered(): void {
    const last = this.records.at(-1);
    if (
      last &&
      last.recoveredMs === undefined &&
      this.o.monitor.healthyPrimary(this.notBeforeMs()) !== undefined
    ) {
      last.recoveredMs = this.o.now();
    }
  }

  private async execute(r: FaultRecord, primary: NodeName): Promise<void> {
    const { cluster, hosts, monitor } = this.o;
    const p = r.plan;
    const standby = peerOf(primary);
    r.epochBefore = monitor.latest(primary)?.epoch ?? 0;
    const target = p.kind === "kill-standby" ? standby : primary;
    r.target = target;
    r.targetRole = target === primary ? "primary" : "standby";
    r.startMs = this.o.now();
    const failover = this.watchFailover(r);
    switch (p.kind) {
      case "kill":
      case "kill-standby": {
        const pid = cluster.pid(target);
        await cluster.kill(target);
        r.applied = `SIGKILL ${cluster.nodeId(target)} (pid ${pid})`;
        this.applied(r);
        if (this.o.restart) this.restartLater(target, p.restartDelayMs, r);
        break;
      }
      case "pause":
        cluster.pause(target);
        r.applied = `SIGSTOP ${cluster.nodeId(target)} for ${p.holdMs} ms`;
        this.applied(r);
        await sleep(p.holdMs);
        cluster.resume(target);
        r.endMs = this.o.now();
        break;
      case "partition": {
        const side = p.side === "both" ? "both" : p.side === "primary" ? primary : standby;
        await hosts.partition(side);
        r.applied =
          side === "both"
            ? "partition both ways"
            : `packets from ${cluster.nodeId(side)} to ${cluster.nodeId(peerOf(side))} dropped`;
        this.applied(r);
        await sleep(p.holdMs);
        await hosts.heal();
        r.endMs = this.o.now();
        break;
      }
      case "netem":
        r.applied = await hosts.degrade(p.degrade!);
        this.applied(r);
        await sleep(p.holdMs);
        await hosts.restore();
        r.endMs = this.o.now();
        break;
    }
    // Kills and pauses of the primary must end in a failover; wait for it before the next.
    if (p.kind === "kill" || p.kind === "pause") await failover;
    if (r.failoverMs !== undefined) {
      this.o.log(
        `fault #${p.index}: ${r.newPrimary} acknowledged at epoch ${r.newEpoch} after ${Math.round(r.failoverMs)} ms`,
      );
    }
  }

  private applied(r: FaultRecord): void {
    this.o.log(`fault #${r.plan.index} ${r.plan.kind}: ${r.applied}`);
  }

  /**
   * Records the first acknowledgement of an epoch above the one before the fault, up to 30 s
   * after it and no later than a second after the pair was healthy again (a later epoch
   * belongs to the next fault).
   */
  private async watchFailover(r: FaultRecord): Promise<void> {
    const { acks } = this.o;
    const start = r.startMs!;
    const deadline = start + 30_000;
    let i = firstIndexAtOrAfter(acks, start);
    while (this.o.now() < deadline) {
      for (; i < acks.length; i++) {
        const a = acks[i]!;
        if (r.recoveredMs !== undefined && a.atMs > r.recoveredMs + 1000) return;
        if (a.epoch > r.epochBefore!) {
          r.failoverMs = a.atMs - start;
          r.newPrimary = a.nodeId;
          r.newEpoch = a.epoch;
          return;
        }
      }
      if (r.recoveredMs !== undefined && this.o.now() > r.recoveredMs + 1000) return;
      await sleep(20);
    }
  }

  private restartLater(n: NodeName, delayMs: number, r: FaultRecord | undefined): void {
    this.restarting.add(n);
    const done = (async () => {
      await sleep(delayMs);
      try {
        if (this.o.cluster.state(n) === "down") await this.o.cluster.start(n);
        if (r) r.endMs ??= this.o.now();
      } catch (e) {
        r?.errors.push(`restart of ${n}: ${(e as Error).message}`);
      }
    })();
    this.restarts.add(done);
    void done.finally(() => {
      this.restarts.delete(done);
      this.restarting.delete(n);
    });
  }

  /** Undoes everything: heal, restore, SIGCONT, start dead nodes; waits for a healthy pair. */
  async healAll(): Promise<{ healedMs: number; healthy: boolean }> {
    const { cluster, hosts } = this.o;
    await Promise.all([...this.restarts]);
    await hosts.heal();
    await hosts.restore();
    for (const n of ["a", "b"] as const) {
      if (cluster.state(n) === "paused") cluster.resume(n);
    }
    for (const n of ["a", "b"] as const) {
      if (cluster.state(n) === "down") await cluster.start(n);
    }
    const healedMs = this.o.now();
    this.healedAtMs = healedMs;
    const healthy = (await this.waitHealthy()) !== undefined;
    this.markRecovered();
    return { healedMs, healthy };
  }
}

/** Index of the first ack at or after `ms` (acks are in arrival order). */
export function firstIndexAtOrAfter(acks: readonly Ack[], ms: number): number {
  let lo = 0;
  let hi = acks.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (acks[mid]!.atMs < ms) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
