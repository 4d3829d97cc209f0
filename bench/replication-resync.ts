// Resync under load (#14): a sync pair, the primary holding RESYNC_BYTES of buffers, guests
// loading it (LOAD_SESSIONS x LOAD_WINDOW fences outstanding, plus one guest sending fences
// one at a time whose waits are the stall); the standby is stopped and a fresh (empty) one
// started on the same address, as systemd restarts a node. It gets a snapshot while the load
// goes on, then the entries logged meanwhile. Measured: standby start → its status says
// eligible (time to eligible), and the longest wait of a one-at-a-time call answered after the
// primary logged "snapshot completed" (the stall while the backlog drains: sync replies wait
// for it). Only on the stall after the snapshot is there a target: the wait while the standby
// is down (the primary fences for a lease before it serves alone) is the failure model's.
import { performance } from "node:perf_hooks";
import { leaseOverride, reservePort, startPrimary, startStandby } from "./cluster.js";
import { backgroundCalls, type Client, openClient } from "./guest-workload.js";
import { longestAnswered, longestWithin, type Stall, sampleLatency } from "./latency-sampler.js";
import { tallyLeaseEvents } from "./lease-events.js";
import type { NodeProcess } from "./node-process.js";
import { status, waitFor } from "./ops-client.js";
import type { Metric } from "./report.js";
import { fill } from "./snapshot-catch-up.js";
import { sleepMs } from "./timing.js";

const MiB = 2 ** 20;
const RESYNC_BYTES = 256 * MiB;
const LOAD_SESSIONS = 4;
const LOAD_WINDOW = 64;
const LOAD_BEFORE_MS = 500;
const AFTER_MS = 500;
const ELIGIBLE_TIMEOUT_MS = 120_000;
const DEFAULT_LEASE_MS = 500;

export interface ResyncUnderLoad {
  readonly bytes: number;
  /** Standby spawned → its status says eligible. */
  readonly timeToEligibleMs: number;
  /** Primary log "snapshot completed" → the standby eligible (as seen by polling). */
  readonly snapshotToEligibleMs: number;
  /** Longest one-at-a-time call answered after the snapshot completed. */
  readonly afterSnapshot: Stall;
  /** Longest wait from the standby's stop until the snapshot completed (fence, then alone). */
  readonly beforeSnapshotEnd: Stall;
  /** Most entries the standby lacked (primary's status, polled while waiting). */
  readonly maxLagEntries: number;
  readonly loadCallsPerSecond: number;
  readonly leaseEvents: ReturnType<typeof tallyLeaseEvents>;
}

const wallMs = () => performance.timeOrigin + performance.now();

async function eligible(standby: NodeProcess): Promise<boolean> {
  const r = (await status(standby)).replication as { eligible?: boolean } | null;
  return r?.eligible === true;
}

/** Wall-clock ms of the primary's last "snapshot completed" log line. */
function snapshotCompletedMs(primary: NodeProcess): Promise<number> {
  return waitFor("snapshot logged", 10_000, async () => {
    const line = primary.logLines().findLast((l) => l.msg === "snapshot completed");
    return line === undefined ? undefined : Date.parse(String(line.time));
  });
}

export async function measureResync(): Promise<ResyncUnderLoad> {
  const listen = `127.0.0.1:${await reservePort()}`;
  const nodes: NodeProcess[] = [];
  const clients: Client[] = [];
  let standby = await startStandby("resync-standby", { listen });
  nodes.push(standby);
  try {
    const primary = await startPrimary({ label: "resync-primary", mode: "sync", peer: listen });
    nodes.push(primary);
    await waitFor("streaming", 60_000, async () =>
      (await status(primary)).replication?.state === "streaming" ? true : undefined,
    );
    const filler = await openClient(primary.guest);
    clients.push(filler);
    await fill(filler, RESYNC_BYTES);
    for (let i = 0; i < LOAD_SESSIONS + 1; i++) clients.push(await openClient(primary.guest));
    const load = backgroundCalls(clients.slice(2), LOAD_WINDOW);
    const sampler = sampleLatency(clients[1]!);
    await sleepMs(LOAD_BEFORE_MS);
    const loadStartMs = performance.now();
    const loadStart = load.answered();

    const stoppedMs = wallMs();
    nodes.splice(nodes.indexOf(standby), 1);
    await standby.stop(); // its directory and log go with it
    const spawnedMs = performance.now();
    standby = await startStandby("resync-standby-restarted", {
      listen,
      primary: primary.replication,
    });
    nodes.push(standby);
    let maxLagEntries = 0;
    await waitFor("eligible", ELIGIBLE_TIMEOUT_MS, async () => {
      // lag is null while the primary has no standby to lag behind
      const lag = (await status(primary)).replication?.lag?.entries ?? 0;
      maxLagEntries = Math.max(maxLagEntries, lag);
      return (await eligible(standby)) ? true : undefined;
    });
    const eligibleMs = wallMs();
    const timeToEligibleMs = performance.now() - spawnedMs;
    await sleepMs(AFTER_MS);
    const samples = await sampler.stop();
    const loadCallsPerSecond =
      ((await load.stop()) - loadStart) / ((performance.now() - loadStartMs) / 1000);
    const completedMs = await snapshotCompletedMs(primary);
    const result: ResyncUnderLoad = {
      bytes: RESYNC_BYTES,
      timeToEligibleMs,
      snapshotToEligibleMs: eligibleMs - completedMs,
      afterSnapshot: longestAnswered(samples, completedMs, Number.POSITIVE_INFINITY),
      beforeSnapshotEnd: longestWithin(samples, stoppedMs, completedMs),
      maxLagEntries,
      loadCallsPerSecond,
      leaseEvents: tallyLeaseEvents("resync-pair", nodes), // the primary and the new standby
    };
    console.log(
      `  eligible ${result.timeToEligibleMs.toFixed(0)} ms after the restart; longest stall after the snapshot ${result.afterSnapshot.maxMs.toFixed(0)} ms (backlog up to ${maxLagEntries} entries)`,
    );
    return result;
  } finally {
    await Promise.all(clients.map((c) => c.session.close().catch(() => undefined)));
    for (const n of nodes.reverse()) await n.stop();
  }
}

export function resyncMetrics(r: ResyncUnderLoad): Metric[] {
  const leaseMs = leaseOverride()?.durationMs ?? DEFAULT_LEASE_MS;
  return [
    {
      name: "resync_under_load_max_stall_ms",
      value: r.afterSnapshot.maxMs,
      unit: `ms (longest call answered after "snapshot completed"; ${r.afterSnapshot.calls} calls; backlog up to ${r.maxLagEntries} entries)`,
      target: { kind: "atMost", value: leaseMs, note: "#14: one lease" },
    },
    {
      name: "resync_under_load_time_to_eligible_ms",
      value: r.timeToEligibleMs,
      unit: `ms (fresh standby spawned → eligible; ${(r.snapshotToEligibleMs / 1000).toFixed(1)} s of it after the snapshot)`,
    },
    {
      name: "resync_under_load_standby_down_max_stall_ms",
      value: r.beforeSnapshotEnd.maxMs,
      unit: `ms (standby stopped → snapshot completed: fenced a lease, then alone; lapses ${r.leaseEvents.lapses})`,
    },
    {
      name: "resync_under_load_load_calls_per_s",
      value: r.loadCallsPerSecond,
      unit: `calls/s (the ${LOAD_SESSIONS} x ${LOAD_WINDOW} background fences, restart to end)`,
    },
  ];
}

export const RESYNC_NOTE = `resync: a sync pair, the primary holding ${RESYNC_BYTES / MiB} MiB of filled buffers and ${LOAD_SESSIONS} sessions x ${LOAD_WINDOW} fences outstanding plus one session sending fences one at a time; the standby stopped (SIGTERM) and a fresh one started on its address at once; time_to_eligible = spawn → the new standby's status replication.eligible; max_stall = the longest one-at-a-time fence answered after the primary's log "snapshot completed" until ${AFTER_MS} ms after eligible (sync replies wait for the entries logged during the snapshot); standby_down_max_stall = the longest wait (clipped) from the stop to "snapshot completed"`;
