// A fresh standby catching up by snapshot from a primary holding `totalBytes` of non-zero
// buffers, with a guest calling the primary one call at a time throughout:
//   1. primary (sync mode) starts with its standby's address reserved but nobody there;
//      a guest fills the buffers (fill kernel), then the sampler guest runs `baselineMs`
//      alone: its longest call is the baseline;
//   2. the standby starts on the reserved port; the primary dials it (every reconnectMs),
//      sends the snapshot, and streams; we wait for status lastSnapshot + state streaming,
//      then until the standby has applied the entries logged meanwhile (lag <= 1 entry);
//   3. from the primary's log: "replication link up" (the standby's hello arrived; the
//      snapshot source is built on it), "snapshot started" (built), "snapshot completed".
// The pause is the longest wait of a sampler call within [link up, completed] (each call
// clipped to that stretch). During the transfer a sync primary answers at once (no standby
// in sync); after it, sync replies wait for the standby to apply the backlog of entries
// logged during the transfer: that wait is reported apart, as the catch-up stall.
import { performance } from "node:perf_hooks";
import { buf, u32 } from "@vgpu-ha/client";
import type { OtherBuild } from "./before-build.js";
import { reservePort, startPrimary, startStandby } from "./cluster.js";
import { collectProfiles, startProfiles } from "./cpu-profile.js";
import { type Client, CpuMeter, openClient } from "./guest-workload.js";
import { longestAnswered, longestWithin, type Stall, sampleLatency } from "./latency-sampler.js";
import { tallyLeaseEvents } from "./lease-events.js";
import type { NodeProcess } from "./node-process.js";
import { status, waitFor } from "./ops-client.js";
import { type SnapshotCpu, SnapshotCpuMeter } from "./snapshot-cpu.js";
import { sleepMs } from "./timing.js";

const BO_BYTES_MAX = 256 * 2 ** 20;
const SNAPSHOT_TIMEOUT_MS = 120_000;
const CATCH_UP_TIMEOUT_MS = 60_000;
/** Sampling goes on this long after the standby caught up. */
const AFTER_MS = 300;

export interface SnapshotCatchUp {
  readonly boBytes: number;
  /** Snapshot bytes sent and the primary's time for them (first chunk made → last acked). */
  readonly bytes: number;
  readonly seconds: number;
  readonly mbPerSecond: number;
  /** Standby spawned → the primary's status shows it streaming (includes the standby's start). */
  readonly endToEndSeconds: number;
  /** Log times (ms resolution): link up → "snapshot started" (the source's constructor). */
  readonly sourceBuildMs: number;
  /** Log times: "snapshot started" → "snapshot completed". */
  readonly transferMs: number;
  readonly baseline: Stall;
  /** Longest guest wait within the snapshot (link up → completed). */
  readonly pause: Stall & { readonly sinceLinkUpMs: number };
  /** Entries the standby lacked when the snapshot completed (first status seen). */
  readonly backlogEntries: number;
  /** Snapshot completed → the standby applied the backlog (status polled every 20 ms). */
  readonly catchUpMs: number;
  /** Longest guest call answered between the snapshot's completion and the end of sampling. */
  readonly catchUpStall: Stall;
  /** CPU while the standby started and caught up, in % of one core (machine: of all cores). */
  readonly primaryCpuPct: number;
  readonly standbyCpuPct: number;
  readonly clientCpuPct: number;
  readonly machineCpuPct: number;
  /** CPU per MiB of each node's threads over the middle of the transfer (snapshot-cpu.ts). */
  readonly transferCpu: SnapshotCpu | undefined;
  readonly profiles: readonly string[];
}

const wallMs = () => performance.timeOrigin + performance.now();

/** `spawn`: another build's (before-build.ts) for both nodes; this build's when left out. */
export async function snapshotCatchUp(
  label: string,
  totalBytes: number,
  baselineMs: number,
  spawn?: OtherBuild["spawn"],
): Promise<SnapshotCatchUp> {
  const port = await reservePort();
  const primary = await startPrimary({
    label: `${label}-primary`,
    mode: "sync",
    peer: `127.0.0.1:${port}`,
    spawn,
  });
  let standby: NodeProcess | undefined;
  const clients: Client[] = [];
  try {
    const filler = await openClient(primary.guest);
    clients.push(filler);
    await fill(filler, totalBytes);
    const guest = await openClient(primary.guest);
    clients.push(guest);
    const cpuMeter = new SnapshotCpuMeter(primary);
    const baselineSampler = sampleLatency(guest);
    await sleepMs(baselineMs);
    const baseline = longestWithin(await baselineSampler.stop(), 0, Number.POSITIVE_INFINITY);

    const sampler = sampleLatency(guest);
    const meter = new CpuMeter([primary]);
    meter.start();
    startProfiles([primary]);
    const spawnedMs = performance.now();
    standby = await startStandby(`${label}-standby`, {
      listen: `127.0.0.1:${port}`,
      primary: primary.replication,
      profileFromStart: true,
      spawn,
    });
    const pair = standby;
    let coverBytes = 0;
    const done = await waitFor("snapshot installed", SNAPSHOT_TIMEOUT_MS, async () => {
      const r = (await status(primary)).replication;
      if (r?.snapshot) {
        coverBytes = r.snapshot.totalBytes;
        cpuMeter.sample(r.snapshot.doneBytes, pair);
      }
      return r?.state === "streaming" && r.lastSnapshot !== null ? r : undefined;
    });
    const transferCpu = cpuMeter.result(coverBytes, pair);
    const endToEndSeconds = (performance.now() - spawnedMs) / 1000;
    const cpu = meter.stop();
    const standbyCpuPct = (standby.cpuSeconds() / endToEndSeconds) * 100;
    const profiles = await collectProfiles([primary, standby], `snapshot-${label}`);
    const caughtUpMs = await waitFor("caught up", CATCH_UP_TIMEOUT_MS, async () => {
      const r = (await status(primary)).replication;
      return r !== null && r.lag.entries <= 1 ? wallMs() : undefined;
    });
    await sleepMs(AFTER_MS);
    const samples = await sampler.stop();
    const times = await snapshotLogTimes(primary);
    const pause = longestWithin(samples, times.linkUpMs, times.completedMs);
    const snapshot = done.lastSnapshot!;
    return {
      boBytes: totalBytes,
      bytes: snapshot.bytes,
      seconds: snapshot.seconds,
      mbPerSecond: snapshot.bytes / snapshot.seconds / 1e6,
      endToEndSeconds,
      sourceBuildMs: times.startedMs - times.linkUpMs,
      transferMs: times.completedMs - times.startedMs,
      baseline,
      pause: { ...pause, sinceLinkUpMs: pause.atMs - times.linkUpMs },
      backlogEntries: done.lag.entries,
      catchUpMs: caughtUpMs - times.completedMs,
      catchUpStall: longestAnswered(samples, times.completedMs, Number.POSITIVE_INFINITY),
      primaryCpuPct: cpu.nodePcts[0]!,
      standbyCpuPct,
      clientCpuPct: cpu.clientPct,
      machineCpuPct: cpu.machinePct,
      transferCpu,
      profiles,
    };
  } finally {
    await Promise.all(clients.map((c) => c.session.close().catch(() => undefined)));
    tallyLeaseEvents(`snapshot-${label}`, standby ? [primary, standby] : [primary]);
    await standby?.stop();
    await primary.stop();
  }
}

/** Buffers of at most 256 MiB, every word written non-zero by the fill kernel. */
export async function fill(c: Client, totalBytes: number): Promise<void> {
  for (let done = 0, i = 1; done < totalBytes; i++) {
    const bytes = Math.min(BO_BYTES_MAX, totalBytes - done);
    const bo = await c.session.allocBo(c.context, bytes);
    await c.session.launch(c.context, "fill", [buf(bo), u32(bytes / 4), u32(0x01010101 * i)]);
    done += bytes;
  }
  await c.session.fence(c.context);
}

/** Wall-clock ms of the primary's last snapshot's log lines (waits for them to be written). */
function snapshotLogTimes(primary: NodeProcess) {
  return waitFor("snapshot logged", 10_000, async () => {
    const lines = primary.logLines();
    const last = (msg: string) => {
      const line = lines.findLast((l) => l.msg === msg);
      return line === undefined ? undefined : Date.parse(String(line.time));
    };
    const completedMs = last("snapshot completed");
    const startedMs = last("snapshot started");
    const linkUpMs = last("replication link up");
    if (completedMs === undefined || startedMs === undefined || linkUpMs === undefined) {
      return undefined;
    }
    return { linkUpMs, startedMs, completedMs };
  });
}
