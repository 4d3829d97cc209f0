// Every knob of one simulated run, drawn from its seed and printed with any failure, so the
// seed alone replays the run. Ranges are chosen so runs are small (a few hundred frames, a few
// simulated seconds) and so that every path is hit across a thousand seeds: resume from the
// log and snapshot, per-page and per-store MMIO, sync and async, each network fault alone and
// several together.
import type { SenderOptions } from "@vgpu-ha/primary";
import { SimRng } from "./rng.js";

export type AckMode = "async" | "sync" | "sync-applied";

export interface NetworkParams {
  readonly latencyMinMs: number;
  readonly latencyMaxMs: number;
  /** Probability that a message is lost on its own (the link stays up). */
  readonly dropRate: number;
  readonly dupRate: number;
  /** Probability that a message is held back by up to reorderMaxMs more. */
  readonly reorderRate: number;
  readonly reorderMaxMs: number;
  /** Mean link breaks per simulated second (0: never). */
  readonly disconnectsPerSec: number;
  readonly reconnectMaxMs: number;
}

export interface WorkloadParams {
  readonly frames: number;
  readonly sessions: number;
  readonly tenants: number;
  readonly invalidPercent: number;
  readonly resendPercent: number;
  /** Frames a session has in flight at most before it waits for a reply. */
  readonly windowFrames: number;
  /** Mean gap between the guests' frames. */
  readonly issueGapMs: number;
}

export interface SimParams {
  readonly seed: number;
  readonly ackMode: AckMode;
  readonly mmio: "per-page" | "per-store";
  readonly flushBytes: number;
  readonly flushIntervalMs: number;
  readonly workload: WorkloadParams;
  readonly network: NetworkParams;
  /** The standby joins empty this late (0: at the start). */
  readonly standbyStartMs: number;
  /** Mean standby restarts (a new, empty process) per simulated second. */
  readonly standbyRestartsPerSec: number;
  readonly standbyRestartDownMaxMs: number;
  /** A checkpoint entry with the primary's digest this often (0: none). */
  readonly checkpointEveryMs: number;
  readonly snapshotChunkBytes: number;
  readonly sender: Omit<SenderOptions, "clusterId" | "nodeId" | "peerName">;
  /** The shell's poll timer. */
  readonly tickMs: number;
  /** How long the healed system may take to catch up before that counts as a liveness failure. */
  readonly livenessBoundMs: number;
  /** Mean latency of each entry's device work on the primary and the standby (0: instant). */
  readonly primaryDeviceMeanMs: number;
  readonly standbyDeviceMeanMs: number;
  /** Mean promotion probes per simulated second: would the standby take over now? */
  readonly promotionProbesPerSec: number;
}

export function drawParams(seed: number): SimParams {
  const rng = new SimRng(seed);
  const heartbeatMs = rng.int(20, 200);
  const mmio = rng.chance(0.75) ? "per-page" : "per-store";
  const workload = drawWorkload(rng);
  // About how long the guests send for: a late standby joins (and snapshots) under load.
  const loadMs = workload.frames * workload.issueGapMs;
  return {
    seed,
    ackMode: rng.chance(0.7) ? rng.pick(["sync", "sync-applied"] as const) : "async",
    mmio,
    flushBytes: rng.pick([64, 512, 4096, 65536]),
    flushIntervalMs: rng.int(1, 4),
    workload,
    network: drawNetwork(rng),
    standbyStartMs: rng.chance(0.4) ? Math.round(rng.real(0.05, 0.9) * loadMs) : 0,
    standbyRestartsPerSec: rng.chance(0.25) ? rng.real(0.5, 8) : 0,
    standbyRestartDownMaxMs: rng.int(1, 200),
    checkpointEveryMs: rng.chance(0.5) ? rng.int(100, 500) : 0,
    snapshotChunkBytes: rng.pick([4096, 16384, 65536]),
    sender: {
      maxBatchEntries: rng.pick([1, 4, 16, 64]),
      maxBatchBytes: rng.pick([256, 4096, 65536]),
      // Per-store mode makes an entry of every store: one entry per round trip would take
      // minutes of simulated time, which tests nothing more.
      maxInflightEntries: rng.pick(mmio === "per-store" ? [8, 64, 1024] : [1, 8, 64, 1024]),
      maxInflightBytes: rng.pick([1024, 16384, 1 << 20]),
      snapshotWindowChunks: rng.int(1, 8),
      heartbeatMs,
      retransmitMs: rng.int(20, 400),
      retainBytes: rng.pick([0, 256, 4096, 65536, 1 << 20]),
    },
    tickMs: Math.max(5, Math.min(50, heartbeatMs / 2)),
    livenessBoundMs: 20_000,
    ...drawDevices(rng),
  };
}

/** The devices: instant in some runs, else a random mean latency (the standby's may be slower). */
function drawDevices(rng: SimRng) {
  const mean = () => (rng.chance(0.2) ? 0 : rng.real(0.02, 3));
  return {
    primaryDeviceMeanMs: mean(),
    standbyDeviceMeanMs: rng.chance(0.3) ? rng.real(2, 8) : mean(),
    promotionProbesPerSec: rng.real(1, 20),
  };
}

function drawWorkload(rng: SimRng): WorkloadParams {
  const sessions = rng.int(2, 4);
  return {
    frames: rng.int(100, 300),
    sessions,
    tenants: rng.int(1, 2),
    invalidPercent: rng.int(0, 15),
    resendPercent: rng.int(0, 5),
    windowFrames: rng.int(1, 8),
    issueGapMs: rng.real(0.1, 4),
  };
}

function drawNetwork(rng: SimRng): NetworkParams {
  const latencyMinMs = rng.int(0, 5);
  return {
    latencyMinMs,
    latencyMaxMs: latencyMinMs + rng.int(0, 20),
    dropRate: rng.chance(0.35) ? rng.real(0.001, 0.05) : 0,
    dupRate: rng.chance(0.35) ? rng.real(0.001, 0.1) : 0,
    reorderRate: rng.chance(0.35) ? rng.real(0.01, 0.3) : 0,
    reorderMaxMs: rng.int(1, 50),
    disconnectsPerSec: rng.chance(0.35) ? rng.real(0.5, 10) : 0,
    reconnectMaxMs: rng.int(1, 300),
  };
}

/** One line per group, for failure reports and --verbose. */
export function formatParams(p: SimParams): string {
  const w = p.workload;
  const n = p.network;
  const s = p.sender;
  const f = (x: number) => (Number.isInteger(x) ? String(x) : x.toFixed(3));
  return [
    `seed=${p.seed} ack=${p.ackMode} mmio=${p.mmio} flushBytes=${p.flushBytes} flushIntervalMs=${p.flushIntervalMs}`,
    `  workload: frames=${w.frames} sessions=${w.sessions} tenants=${w.tenants} invalid%=${w.invalidPercent} resend%=${w.resendPercent} windowFrames=${w.windowFrames} issueGapMs=${f(w.issueGapMs)}`,
    `  network: latencyMs=${n.latencyMinMs}..${n.latencyMaxMs} drop=${f(n.dropRate)} dup=${f(n.dupRate)} reorder=${f(n.reorderRate)}(+${n.reorderMaxMs}ms) disconnectsPerSec=${f(n.disconnectsPerSec)} reconnectMaxMs=${n.reconnectMaxMs}`,
    `  standby: startMs=${p.standbyStartMs} restartsPerSec=${f(p.standbyRestartsPerSec)} restartDownMaxMs=${p.standbyRestartDownMaxMs} checkpointEveryMs=${p.checkpointEveryMs} snapshotChunkBytes=${p.snapshotChunkBytes}`,
    `  devices: primaryMeanMs=${f(p.primaryDeviceMeanMs)} standbyMeanMs=${f(p.standbyDeviceMeanMs)} promotionProbesPerSec=${f(p.promotionProbesPerSec)}`,
    `  sender: batch=${s.maxBatchEntries}/${s.maxBatchBytes}B inflight=${s.maxInflightEntries}/${s.maxInflightBytes}B snapshotWindowChunks=${s.snapshotWindowChunks} heartbeatMs=${s.heartbeatMs} retransmitMs=${s.retransmitMs} retainBytes=${s.retainBytes} tickMs=${p.tickMs} livenessBoundMs=${p.livenessBoundMs}`,
  ].join("\n");
}
