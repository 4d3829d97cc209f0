// Every knob of one failover run, drawn from its seed and printed with any failure, so the seed
// alone replays the run. Times are scaled to the lease so that a few leases of faults fit in a
// few simulated seconds; ranges are chosen so that across a couple of thousand seeds every path
// is taken (promotion, split brain and its healing, switchover, restarts, one-way partitions,
// pauses shorter and longer than the lease, snapshots and resumes) and runs stay small.
import {
  checkEtcdLeaseTerms,
  checkLeaseTerms,
  type LeaseTerms,
  minimumDriftMarginMs,
  type ReplicationMode,
} from "@vgpu-ha/common";
import type { SenderOptions } from "@vgpu-ha/primary";
import type { NetworkParams } from "../params.js";
import { SimRng } from "../rng.js";

export type NodeName = "a" | "b";
export const NODES: readonly NodeName[] = ["a", "b"];
export const peerOf = (n: NodeName): NodeName => (n === "a" ? "b" : "a");

export type FaultKind =
  | "crash"
  | "pause"
  | "partition"
  | "reset"
  | "switchover"
  | "guestReset"
  /** etcd mode: a node loses etcd (oneWay: false → etcd is away for both). */
  | "etcdCut";

export interface FaultPlan {
  readonly kind: FaultKind;
  /** Real (simulated) time the fault starts, from the run's start. */
  readonly atMs: number;
  /** The node it hits (crash, pause); for a partition, the side whose outbound is cut. */
  readonly node: NodeName;
  /** Partition: both directions or only node → peer. */
  readonly oneWay: boolean;
  /** Crash: down time; pause: frozen time; partition: how long it lasts; guestReset: which guest (modulo). */
  readonly durationMs: number;
  /** Partition: the connections across it die (keepalive) instead of stalling. */
  readonly killsConnections: boolean;
}

export interface EtcdParams {
  readonly ttlMs: number;
  readonly keepaliveMs: number;
  readonly pollMs: number;
  readonly requestTimeoutMs: number;
  readonly latencyMs: readonly [number, number];
}

/**
 * The simulated device (device.ts): per operation, a latency and a service time (ms, each
 * [min, max]); with probability stallRate an operation's latency is up to stallMs instead.
 */
export interface DeviceParams {
  readonly latencyMs: readonly [number, number];
  readonly serviceMs: readonly [number, number];
  readonly stallRate: number;
  readonly stallMs: number;
}

/**
 * A standby's device that fails while a takeover waits for it (the wait never ended, before the
 * standby driver watched for it): `delayMs` after the first time a node's standby begins to
 * wait for its device's backlog before taking over (on the lease, the key or a recovery)
 * within the fault window, that replica's device fails.
 */
export interface DeviceFailurePlan {
  readonly delayMs: number;
}

export interface FailoverParams {
  readonly seed: number;
  /** peer: heartbeats decide; etcd: the leader key does (then `etcd` is set). */
  readonly leaseMode: "peer" | "etcd";
  readonly etcd: EtcdParams | undefined;
  readonly ackMode: ReplicationMode;
  /** Each node's device; a node without one runs inline (every operation done at submit). */
  readonly device: Readonly<Partial<Record<NodeName, DeviceParams>>>;
  /** A simulated device that fails during a takeover's backlog wait (undefined: none fails). */
  readonly deviceFailure: DeviceFailurePlan | undefined;
  readonly mmio: "per-page" | "per-store";
  readonly lease: LeaseTerms;
  /** Each node's clock rate (1 ± at most maxDriftRatio) and its lateness of timers. */
  readonly clockRate: Readonly<Record<NodeName, number>>;
  readonly timerJitterMs: number;
  /** Epochs already persisted at the start (0: a fresh pair). */
  readonly initialEpoch: Readonly<Record<NodeName, number>>;
  /** When each node's process first starts. */
  readonly startMs: Readonly<Record<NodeName, number>>;
  readonly sender: Omit<SenderOptions, "clusterId" | "nodeId" | "peerName" | "heartbeatMs">;
  readonly reconnectMs: number;
  readonly flushDelayMs: number;
  readonly flushBytes: number;
  readonly snapshotChunkBytes: number;
  readonly maxLagEntries: number;
  /** The node-to-node network (the existing simulator's link faults). */
  readonly network: NetworkParams;
  readonly guestLatencyMs: readonly [number, number];
  readonly guests: {
    readonly frames: number;
    readonly sessions: number;
    readonly tenants: number;
    readonly invalidPercent: number;
    readonly windowFrames: number;
    readonly issueGapMs: number;
    /** The client's keepalive (ping interval and timeout) and connect timeout. */
    readonly keepaliveMs: number;
    readonly connectTimeoutMs: number;
    readonly retryMaxMs: number;
  };
  /** Faults happen in [0, faultWindowMs); then everything heals. */
  readonly faultWindowMs: number;
  readonly faults: readonly FaultPlan[];
  /** After healing, the pair must settle (one primary, replicas equal, guests done) this fast. */
  readonly livenessBoundMs: number;
}

export function drawFailoverParams(seed: number): FailoverParams {
  const rng = new SimRng(seed ^ 0x5eed_fa11);
  let lease = drawLease(rng);
  const L = lease.leaseMs;
  const faultWindowMs = Math.round(L * rng.real(3, 10));
  const frames = rng.int(30, 120);
  const mmio = rng.chance(0.75) ? "per-page" : "per-store";
  const rate = () => {
    const r = lease.maxDriftRatio;
    // The extremes (primary slow, standby fast) are what the margin must cover.
    return rng.chance(0.4) ? rng.pick([1 - r, 1 + r]) : rng.real(1 - r, 1 + r);
  };
  const fresh = rng.chance(0.7);
  // etcd mode draws from its own stream, so peer-mode runs stay as they were.
  const etcdRng = rng.fork(0xe7cd);
  const etcd = etcdRng.chance(0.25) ? drawEtcd(etcdRng, lease) : undefined;
  if (etcd) lease = etcd.lease;
  // The device and sync-applied (issue #14) draw from a stream of their own, seeded apart,
  // so every other parameter of a seed stays what it was before them.
  const deviceRng = new SimRng((seed ^ 0xde71ce) >>> 0);
  const device: Partial<Record<NodeName, DeviceParams>> = {};
  if (deviceRng.chance(0.75)) {
    for (const n of NODES) if (deviceRng.chance(0.8)) device[n] = drawDevice(deviceRng, lease);
  }
  const syncMode = deviceRng.chance(0.5) ? "sync" : "sync-applied";
  const deviceFailure = drawDeviceFailure(new SimRng((seed ^ 0xfa11ed) >>> 0), device, lease);
  return {
    seed,
    leaseMode: etcd ? "etcd" : "peer",
    etcd: etcd?.terms,
    ackMode: rng.chance(0.8) ? syncMode : "async",
    device,
    deviceFailure,
    mmio,
    lease,
    clockRate: { a: rate(), b: rate() },
    timerJitterMs: rng.pick([0, 0.5, 2]),
    // A pair that ran before: both epoch files (a wiped disk is an operator's business).
    initialEpoch: fresh ? { a: 0, b: 0 } : { a: rng.int(1, 6), b: rng.int(1, 6) },
    startMs: rng.chance(0.6)
      ? { a: 0, b: 0 }
      : { a: rng.chance(0.5) ? 0 : rng.int(0, 3 * L), b: rng.chance(0.5) ? 0 : rng.int(0, 3 * L) },
    sender: {
      maxBatchEntries: rng.pick([4, 16, 64]),
      maxBatchBytes: rng.pick([4096, 65536]),
      maxInflightEntries: rng.pick(mmio === "per-store" ? [64, 1024] : [8, 64, 1024]),
      maxInflightBytes: rng.pick([16384, 1 << 20]),
      snapshotWindowChunks: rng.int(1, 8),
      retransmitMs: rng.int(Math.max(10, Math.round(L / 5)), 2 * L),
      retainBytes: rng.pick([0, 4096, 65536, 1 << 20]),
    },
    reconnectMs: rng.int(10, Math.max(10, Math.round(L / 3))),
    flushDelayMs: rng.int(0, 3),
    flushBytes: rng.pick([512, 4096, 1 << 20]),
    snapshotChunkBytes: rng.pick([4096, 16384, 65536]),
    maxLagEntries: rng.pick([50, 200_000]),
    network: drawNetwork(rng, L),
    guestLatencyMs: [rng.real(0, 1), rng.real(1, 4)],
    guests: {
      frames,
      sessions: rng.int(2, 4),
      tenants: rng.int(1, 2),
      invalidPercent: rng.int(0, 10),
      windowFrames: rng.int(1, 8),
      issueGapMs: (faultWindowMs / frames) * rng.real(0.3, 1.2),
      keepaliveMs: Math.round(L * rng.real(0.5, 1.5)),
      connectTimeoutMs: Math.round(L * rng.real(1, 3)),
      retryMaxMs: rng.int(20, 100),
    },
    faultWindowMs,
    faults: [
      ...drawFaults(rng, L, faultWindowMs),
      ...(etcd ? drawEtcdFaults(etcdRng, L, faultWindowMs) : []),
    ].sort((x, y) => x.atMs - y.atMs),
    // A switchover that fails holds guests for its 10 s timeout: the bound covers it.
    livenessBoundMs: Math.max(12_000, 40 * L),
  };
}

/**
 * A device that is mostly quick, with stalls: now and then one operation takes up to a few
 * leases (the operations behind it wait in order), so a standby's device may still hold a
 * backlog when its primary's lease has run out — without slowing every frame of the run.
 */
function drawDevice(rng: SimRng, lease: LeaseTerms): DeviceParams {
  const L = lease.leaseMs;
  const latencyMax = rng.pick([0.02, 0.1, 0.3]) * L * rng.real(0.5, 1);
  return {
    latencyMs: [rng.real(0, latencyMax / 4), latencyMax],
    serviceMs: [0, rng.pick([0, 0.5, 3]) * rng.real(0.5, 1)],
    stallRate: rng.pick([0.01, 0.05, 0.15]),
    stallMs: L * rng.real(0.5, 3),
  };
}

/**
 * In half the runs with a simulated device, a standby's device fails during the first backlog
 * wait (if there is one: a plan without a wait changes nothing), at once or within half a lease
 * of it. Drawn from a stream of its own: every other parameter of a seed stays what it was.
 */
function drawDeviceFailure(
  rng: SimRng,
  device: Partial<Record<NodeName, DeviceParams>>,
  lease: LeaseTerms,
): DeviceFailurePlan | undefined {
  if (NODES.every((n) => device[n] === undefined) || !rng.chance(0.5)) return undefined;
  return { delayMs: rng.chance(0.5) ? 0 : Math.round(rng.real(0, lease.leaseMs / 2)) };
}

function drawLease(rng: SimRng): LeaseTerms {
  const leaseMs = rng.int(100, 600);
  const heartbeatMs = rng.int(Math.max(20, Math.round(leaseMs / 10)), Math.floor(leaseMs / 3));
  const maxDriftRatio = rng.pick([0, 0.001, 0.01, 0.05]);
  const least = minimumDriftMarginMs(leaseMs, maxDriftRatio);
  const room = leaseMs - heartbeatMs - 1 - least;
  const terms = {
    leaseMs,
    heartbeatMs,
    // Often exactly the least margin the drift needs: the edge the lease rule must hold at.
    driftMarginMs: least + (rng.chance(0.5) ? 0 : rng.int(0, Math.min(room, leaseMs / 5))),
    maxDriftRatio,
  };
  const why = checkLeaseTerms(terms);
  if (why !== null) throw new Error(`drawn lease terms are invalid: ${why}`);
  return terms;
}

/**
 * etcd terms scaled to the lease, and the lease terms with a drift margin that suits both
 * (the config validates both with the one margin); drift at most 1 %: a larger one over a TTL
 * of several leases would leave no lease.
 */
function drawEtcd(rng: SimRng, peer: LeaseTerms): { terms: EtcdParams; lease: LeaseTerms } {
  const L = peer.leaseMs;
  const maxDriftRatio = Math.min(peer.maxDriftRatio, 0.01);
  const ttlMs = Math.round(L * rng.real(2, 4));
  const keepaliveMs = Math.max(10, Math.round(ttlMs * rng.real(0.1, 0.33)));
  const needed = Math.max(
    minimumDriftMarginMs(L, maxDriftRatio),
    Math.floor((2 * maxDriftRatio * ttlMs) / (1 + maxDriftRatio)) + 1,
  );
  const lease = { ...peer, maxDriftRatio, driftMarginMs: needed + rng.int(0, 5) };
  const terms: EtcdParams = {
    ttlMs,
    keepaliveMs,
    pollMs: Math.max(20, Math.round(L * rng.real(0.1, 0.4))),
    requestTimeoutMs: Math.round(ttlMs * rng.real(0.2, 0.5)),
    latencyMs: [rng.real(0.2, 1), rng.real(1, 4)],
  };
  const why =
    checkLeaseTerms(lease) ??
    checkEtcdLeaseTerms({ ttlMs, keepaliveMs, driftMarginMs: lease.driftMarginMs, maxDriftRatio });
  if (why !== null) throw new Error(`drawn etcd terms are invalid: ${why}`);
  return { terms, lease };
}

function drawEtcdFaults(rng: SimRng, L: number, windowMs: number): FaultPlan[] {
  const n = rng.int(0, 2);
  const faults: FaultPlan[] = [];
  for (let i = 0; i < n; i++) {
    faults.push({
      kind: "etcdCut",
      atMs: Math.round(rng.real(0.05, 0.8) * windowMs),
      node: rng.pick(["a", "b"] as const),
      oneWay: rng.chance(0.7),
      durationMs: Math.round(L * rng.real(0.5, 6)),
      killsConnections: false,
    });
  }
  return faults;
}

function drawNetwork(rng: SimRng, leaseMs: number): NetworkParams {
  const latencyMinMs = rng.real(0, 2);
  const faulty = rng.chance(0.5);
  return {
    latencyMinMs,
    latencyMaxMs: latencyMinMs + rng.real(0, Math.min(10, leaseMs / 20)),
    dropRate: faulty && rng.chance(0.3) ? rng.real(0.001, 0.02) : 0,
    dupRate: faulty && rng.chance(0.4) ? rng.real(0.001, 0.05) : 0,
    reorderRate: faulty && rng.chance(0.4) ? rng.real(0.01, 0.2) : 0,
    reorderMaxMs: rng.int(1, Math.max(1, Math.round(leaseMs / 20))),
    disconnectsPerSec: 0,
    reconnectMaxMs: 0,
  };
}

const FAULT_WEIGHTS: readonly [FaultKind, number][] = [
  ["crash", 4],
  ["pause", 4],
  ["partition", 4],
  ["reset", 1],
  ["switchover", 2],
  ["guestReset", 2],
];

function drawFaults(rng: SimRng, L: number, windowMs: number): FaultPlan[] {
  // A few runs without faults (cold start and steady state), most with one to four.
  const n = rng.chance(0.05) ? 0 : rng.int(1, 4);
  const faults: FaultPlan[] = [];
  for (let i = 0; i < n; i++) {
    const kind = weighted(rng, FAULT_WEIGHTS);
    const long = rng.chance(0.6);
    const durationMs =
      kind === "guestReset"
        ? rng.int(0, 3)
        : kind === "pause"
          ? Math.round(long ? L * rng.real(1.2, 4) : L * rng.real(0.1, 0.8))
          : kind === "crash"
            ? Math.round(L * rng.real(0.2, 4))
            : Math.round(L * rng.real(0.5, 5));
    faults.push({
      kind,
      atMs: Math.round(rng.real(0.05, 0.9) * windowMs),
      node: rng.pick(["a", "b"] as const),
      oneWay: kind === "partition" && rng.chance(0.5),
      durationMs,
      killsConnections: kind === "partition" && rng.chance(0.3),
    });
  }
  return faults.sort((x, y) => x.atMs - y.atMs);
}

function weighted<T>(rng: SimRng, choices: readonly [T, number][]): T {
  const total = choices.reduce((s, [, w]) => s + w, 0);
  let at = rng.real(0, total);
  for (const [c, w] of choices) {
    if (at < w) return c;
    at -= w;
  }
  return choices.at(-1)![0];
}

/** One line per group, for failure reports and --verbose. */
export function formatFailoverParams(p: FailoverParams): string {
  const f = (x: number) => (Number.isInteger(x) ? String(x) : x.toFixed(3));
  const l = p.lease;
  const n = p.network;
  const g = p.guests;
  const s = p.sender;
  const faults = p.faults.map(
    (x) =>
      `${x.kind}@${x.atMs}${x.kind === "reset" || x.kind === "switchover" ? "" : x.kind === "guestReset" ? ` g${x.durationMs}` : x.kind === "etcdCut" ? ` ${x.oneWay ? x.node : "both"} ${x.durationMs}ms` : ` ${x.node}${x.kind === "partition" ? (x.oneWay ? "→" : "↔") : ""} ${x.durationMs}ms${x.killsConnections ? " kills" : ""}`}`,
  );
  const e = p.etcd;
  return [
    `failover seed=${p.seed} lease.mode=${p.leaseMode} ack=${p.ackMode} mmio=${p.mmio} flushDelayMs=${p.flushDelayMs} flushBytes=${p.flushBytes} maxLagEntries=${p.maxLagEntries}`,
    `  device: ${NODES.map((n) => {
      const d = p.device[n];
      return d
        ? `${n} latencyMs=${f(d.latencyMs[0])}..${f(d.latencyMs[1])} serviceMs=${f(d.serviceMs[0])}..${f(d.serviceMs[1])} stalls=${f(d.stallRate)}×≤${f(d.stallMs)}ms`
        : `${n} inline`;
    }).join(
      ", ",
    )}${p.deviceFailure ? `; a standby's fails ${p.deviceFailure.delayMs}ms into the first backlog wait` : ""}`,
    ...(e
      ? [
          `  etcd: ttlMs=${e.ttlMs} keepaliveMs=${e.keepaliveMs} pollMs=${e.pollMs} requestTimeoutMs=${e.requestTimeoutMs} latencyMs=${f(e.latencyMs[0])}..${f(e.latencyMs[1])}`,
        ]
      : []),
    `  lease: ${l.leaseMs}ms heartbeat=${l.heartbeatMs}ms margin=${l.driftMarginMs}ms maxDrift=${l.maxDriftRatio} rates a=${f(p.clockRate.a)} b=${f(p.clockRate.b)} timerJitterMs=${p.timerJitterMs}`,
    `  nodes: initialEpoch a=${p.initialEpoch.a} b=${p.initialEpoch.b} startMs a=${p.startMs.a} b=${p.startMs.b} reconnectMs=${p.reconnectMs}`,
    `  network: latencyMs=${f(n.latencyMinMs)}..${f(n.latencyMaxMs)} drop=${f(n.dropRate)} dup=${f(n.dupRate)} reorder=${f(n.reorderRate)}(+${n.reorderMaxMs}ms) guestLatencyMs=${f(p.guestLatencyMs[0])}..${f(p.guestLatencyMs[1])}`,
    `  guests: frames=${g.frames} sessions=${g.sessions} tenants=${g.tenants} invalid%=${g.invalidPercent} window=${g.windowFrames} issueGapMs=${f(g.issueGapMs)} keepaliveMs=${g.keepaliveMs} connectTimeoutMs=${g.connectTimeoutMs} retryMaxMs=${g.retryMaxMs}`,
    `  sender: batch=${s.maxBatchEntries}/${s.maxBatchBytes}B inflight=${s.maxInflightEntries}/${s.maxInflightBytes}B snapshotWindowChunks=${s.snapshotWindowChunks} retransmitMs=${s.retransmitMs} retainBytes=${s.retainBytes} snapshotChunkBytes=${p.snapshotChunkBytes}`,
    `  faults (window ${p.faultWindowMs}ms, liveness bound ${p.livenessBoundMs}ms): ${faults.join(", ") || "none"}`,
  ].join("\n");
}
