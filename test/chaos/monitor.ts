// Watches both nodes from outside, through their ops ports: GET /v1/status every ~100 ms
// (what role, epoch and lease each claims, for the epoch checks and the timeline) and
// GET /metrics every second (split-brain discard counters, per process). A node that does not
// answer within the poll's timeout (paused, dead, starting) is recorded as unreachable.
import { Metrics } from "../support/ops-client.js";
import type { Cluster, ProcessState } from "./cluster.js";
import { type Hosts, NODE_NAMES, type NodeName } from "./hosts.js";

export interface StatusSample {
  readonly atMs: number;
  readonly node: NodeName;
  readonly process: ProcessState;
  readonly pid: number | undefined;
  readonly reachable: boolean;
  readonly role?: string;
  readonly epoch?: number;
  /** The primary's lease state (leased, fenced, degraded), if it states one. */
  readonly lease?: string;
  /** Primary: disconnected|hello|snapshot|streaming; standby: empty|snapshot|replica|diverged. */
  readonly replication?: string;
  readonly degraded?: boolean;
}

export interface MetricsSample {
  readonly atMs: number;
  readonly node: NodeName;
  readonly pid: number | undefined;
  readonly discardedFrames: number;
  readonly discardedAcknowledged: number;
  readonly discardedSessions: number;
}

const POLL_MS = 100;
const METRICS_MS = 1000;
const TIMEOUT_MS = 400;

export class Monitor {
  readonly samples: StatusSample[] = [];
  readonly metrics: MetricsSample[] = [];
  private readonly latestOf = new Map<NodeName, StatusSample>();
  private readonly busy = new Set<string>();
  private timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly hosts: Hosts,
    private readonly cluster: Cluster,
    private readonly now: () => number,
  ) {}

  start(): void {
    this.timers.push(setInterval(() => this.pollStatus(), POLL_MS));
    this.timers.push(setInterval(() => this.pollMetrics(), METRICS_MS));
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
  }

  latest(n: NodeName): StatusSample | undefined {
    return this.latestOf.get(n);
  }

  private async get(n: NodeName, path: string): Promise<Response | undefined> {
    const key = `${n}${path}`;
    if (this.busy.has(key)) return undefined;
    this.busy.add(key);
    try {
      return await fetch(`${this.hosts.placement[n].opsUrl}${path}`, {
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
    } finally {
      this.busy.delete(key);
    }
  }

  private pollStatus(): void {
    for (const n of NODE_NAMES) void this.statusOf(n);
  }

  private async statusOf(n: NodeName): Promise<void> {
    const base = { node: n, process: this.cluster.state(n), pid: this.cluster.pid(n) };
    let sample: StatusSample;
    try {
      const res = await this.get(n, "/v1/status");
      if (res === undefined) return; // the previous poll is still waiting
      const s = (await res.json()) as {
        role?: string;
        epoch?: number;
        lease?: { state?: string } | null;
        replication?: { state?: string } | null;
        degraded?: boolean;
      };
      sample = {
        ...base,
        atMs: this.now(),
        reachable: true,
        ...(s.role === undefined ? {} : { role: s.role }),
        ...(s.epoch === undefined ? {} : { epoch: s.epoch }),
        ...(s.lease?.state === undefined ? {} : { lease: s.lease.state }),
        ...(s.replication?.state === undefined ? {} : { replication: s.replication.state }),
        ...(s.degraded === undefined ? {} : { degraded: s.degraded }),
      };
    } catch {
      sample = { ...base, atMs: this.now(), reachable: false };
    }
    this.samples.push(sample);
    this.latestOf.set(n, sample);
  }

  private pollMetrics(): void {
    for (const n of NODE_NAMES) void this.metricsOf(n);
  }

  private async metricsOf(n: NodeName): Promise<void> {
    try {
      const pid = this.cluster.pid(n);
      const res = await this.get(n, "/metrics");
      if (res === undefined || !res.ok) return;
      const m = new Metrics(await res.text());
      const d = (what: string) => m.get("vgpu_split_brain_discarded_total", { what });
      this.metrics.push({
        atMs: this.now(),
        node: n,
        pid,
        discardedFrames: d("frames"),
        discardedAcknowledged: d("acknowledged_frames"),
        discardedSessions: d("sessions"),
      });
    } catch {
      // unreachable: the status poll records that
    }
  }

  /**
   * The node serving as a healthy primary with a healthy standby (its replica), if the pair is
   * healthy by statuses of the running processes taken since `notBeforeMs`.
   */
  healthyPrimary(notBeforeMs = 0, maxAgeMs = 600): NodeName | undefined {
    const now = this.now();
    const fresh = NODE_NAMES.map((n) => this.latestOf.get(n)).filter(
      (s): s is StatusSample =>
        s?.reachable === true &&
        now - s.atMs <= maxAgeMs &&
        s.atMs >= notBeforeMs &&
        this.cluster.state(s.node) === "running" &&
        s.pid === this.cluster.pid(s.node),
    );
    if (fresh.length !== 2) return undefined;
    const primary = fresh.find(
      (s) =>
        s.role === "primary" &&
        s.replication === "streaming" &&
        s.degraded !== true &&
        (s.lease === undefined || s.lease === "leased"),
    );
    const standby = fresh.find((s) => s.role === "standby" && s.replication === "replica");
    if (!primary || !standby) return undefined;
    return primary.node;
  }

  /** The node that last said it was primary (highest epoch), if any. */
  currentPrimary(): NodeName | undefined {
    const primaries = NODE_NAMES.map((n) => this.latestOf.get(n)).filter(
      (s): s is StatusSample => s?.reachable === true && s.role === "primary",
    );
    primaries.sort((x, y) => (y.epoch ?? 0) - (x.epoch ?? 0));
    return primaries[0]?.node;
  }
}
