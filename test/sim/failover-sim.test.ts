// Proves failover is safe and live: thousands of seeded runs of two simulated nodes (the shipped
// node, primary, standby, guest-service and client drivers over simulated ports, drifting clocks; a
// quarter in etcd lease mode against a simulated etcd) with guests running the exactly-once client
// logic, each node's device simulated with random latencies and stalls in most seeds (so
// takeovers meet a received-but-unapplied backlog, which must be applied before any promotion)
// under crashes and restarts, pauses shorter and longer than the lease, partitions both ways
// and one way, etcd cut off, broken streams, switchovers and link faults; the Checker holds the
// lease, epoch, release and loss rules during faults and the final state (one primary, equal
// replicas, the history replayed from the guests' frames, every guest done) after healing. Then:
// every path the runs claim to cover was taken, the seeds beyond them that once failed pass on
// the path they failed on, and a seed replays exactly.
import { describe, expect, it } from "vitest";
import { drawFailoverParams, type FailoverParams } from "./failover/params.js";
import {
  type FailoverReport,
  formatFailoverResult,
  formatFailoverSummary,
  runFailoverSeeds,
} from "./failover/run-seeds.js";
import { simulateFailover } from "./failover/simulation.js";
import type { FailoverStats } from "./failover/stats.js";

const SEEDS = Number(process.env["SIM_FAILOVER_SEEDS"] ?? 2000);
const BASE_SEED =
  process.env["SIM_SEED"] === "random"
    ? Math.floor(Math.random() * 2 ** 31)
    : Number(process.env["SIM_SEED"] ?? 1);
const SHOWN_FAILURES = 5;
/** About 30 s of CPU for 2000 seeds; room for a loaded machine running other test files. */
const TIMEOUT_MS = 300_000;

describe("failover simulation", () => {
  let report: FailoverReport | undefined;

  it(
    `holds safety and liveness for ${SEEDS} seeds`,
    () => {
      console.log(
        `failover sim: ${SEEDS} seeds from base seed ${BASE_SEED} (SIM_FAILOVER_SEEDS, SIM_SEED)`,
      );
      report = runFailoverSeeds(BASE_SEED, SEEDS);
      console.log(formatFailoverSummary(report));
      const shown = report.failures.slice(0, SHOWN_FAILURES).map(formatFailoverResult);
      expect(
        report.failures.length,
        `${formatFailoverSummary(report)}\n\n${shown.join("\n\n")}`,
      ).toBe(0);
    },
    TIMEOUT_MS,
  );

  it("took every path it claims to cover", () => {
    if (report === undefined || SEEDS < 1000) return; // too few runs to expect every path
    const t = report.totals;
    for (const [path, count] of Object.entries({
      "cold start": t.coldStarts,
      "promotion on lease expiry": t.promotions,
      "takeover waited for a received backlog": t.takeoversAwaitingBacklog,
      "backlog applied, then the takeover": t.backlogsApplied,
      "standby's device failed during the backlog wait": t.standbyDevicesFailed,
      "takeover given up for the failed device": t.takeoversDroppedForDevice,
      "node exited for its device and restarted": t.deviceFailureExits,
      "ineligible standby at expiry": t.ineligibleExpiries,
      "standby detected its own pause": t.selfPauseDetected,
      "restart rejoined as standby": t.rejoinsAsStandby,
      "pair restarted by a standby with no primary in sight": t.recoveryStarts,
      "replica left took over": t.recoveryTakeovers,
      "primary crashed": t.crashesOfPrimary,
      "process restarted": t.restarts,
      "pause shorter than the lease": t.pausesShort,
      "pause longer than the lease": t.pausesLong,
      "two-way partition": t.partitionsTwoWay,
      "one-way partition": t.partitionsOneWay,
      "partition killed the streams": t.partitionKills,
      "streams reset": t.resets,
      "guest streams reset": t.guestResets,
      "two primaries met": t.primariesMet,
      "split brain (both acknowledged)": t.splitBrains,
      "split brain healed (loser stepped down)": t.splitBrainsHealed,
      "solo work discarded and reported": t.soloWorkDiscarded,
      "step-down keeping the state (handover)": t.stepDownsKeeping,
      "switchover done": t.switchoversDone,
      "switchover refused or failed": t.switchoversFailed,
      "primary fenced": t.fencedPeriods,
      "primary degraded": t.degradedPeriods,
      "snapshot installed": t.snapshotsInstalled,
      "resumed from the retained log": t.resumedFromLog,
      "guest resumed its session": t.guestResumes,
      "increment acknowledged": t.incrementsAcked,
      "acknowledged frame lost as allowed": t.lostAckedFrames,
      "message dropped": t.messagesDropped,
      "message duplicated": t.messagesDuplicated,
      "message reordered": t.messagesReordered,
      "etcd mode run": t.etcdRuns,
      "etcd: the standby took the key": t.etcdKeyAcquired,
      "etcd: a primary took its key back": t.etcdKeyRetaken,
      "etcd: a lease expired": t.etcdKeyExpired,
      "etcd: a node lost etcd": t.etcdCuts,
    })) {
      expect(count, `${path} never happened`).toBeGreaterThan(0);
    }
  });

  it.each(REGRESSIONS)("keeps seed $seed fixed: $what", ({ seed, path, noDeviceFailure }) => {
    const drawn = drawFailoverParams(seed);
    const result = simulateFailover(
      noDeviceFailure ? { ...drawn, deviceFailure: undefined } : drawn,
    );
    expect(result.failure, formatFailoverResult(result)).toBeUndefined();
    // Still the scenario it failed in (a change of the code that moves the run elsewhere shows).
    expect(path(result.stats), formatFailoverResult(result)).toBeGreaterThan(0);
  });

  it("replays a seed exactly", () => {
    const seed = busySeed();
    const first = simulateFailover(drawFailoverParams(seed));
    const second = simulateFailover(drawFailoverParams(seed));
    expect(first.failure).toBeUndefined();
    expect(second).toEqual(first);
    expect(first.stats.promotions + first.stats.switchoversDone).toBeGreaterThan(0);
  });
});

/**
 * Seeds beyond the 2000 above that once failed (sweeps of 2001..24000), and a few within them
 * that show a fixed failure by name, each with the count that shows its run still takes the
 * path it failed on.
 */
const REGRESSIONS: readonly {
  readonly seed: number;
  readonly what: string;
  readonly path: (s: FailoverStats) => number;
  /**
   * Replayed without the device failure its seed draws now (params deviceFailure, drawn since):
   * it would strike the backlog wait this seed failed in and take the run elsewhere.
   */
  readonly noDeviceFailure?: boolean;
}[] = [
  {
    seed: 6635,
    what: "etcd, the primary crashed while its standby took a snapshot with entries held for its device; the standby takes over with the replica being replaced once the primary is back empty (awaitDevice overflowed the stack)",
    path: (s) => s.takeoversMidSnapshot,
  },
  {
    seed: 3468,
    what: "peer, the same by recovery takeover (it promoted with a backlog no device would apply)",
    path: (s) => s.takeoversMidSnapshot,
  },
  {
    seed: 6495,
    what: "a dead primary's late snapshot completed on the standby after the restarted primary started afresh; that replica of another history is dropped, not resumed and granted (liveness)",
    path: (s) => s.foreignReplicasDropped,
  },
  {
    seed: 12029,
    what: "peer, the restarted primary answered empty before the granted standby's lease ran out: the recovery takeover waits for the backlog (it promoted with one)",
    path: (s) => s.recoveriesAwaitingBacklog,
  },
  {
    seed: 19223,
    what: "peer, a recovery takeover while the device still wrote an installed snapshot waits for it (it promoted with a backlog of the whole snapshot)",
    path: (s) => s.recoveriesAwaitingBacklog,
  },
  {
    seed: 23192,
    what: "peer, a primary paused past its lease woke while its standby's takeover waited for a backlog longer than the fenced period: the takeover is called off (muted, the standby left it to serve alone with no partition)",
    path: (s) => s.takeoversCalledOff,
    noDeviceFailure: true,
  },
  {
    seed: 23365,
    what: "peer, the restarting node's standby answered a primary of an older epoch than its epoch file's (it renewed that primary's lease and the solo work it discarded went unreported)",
    path: (s) => s.soloWorkDiscarded,
  },
  {
    seed: 12,
    what: "peer, the standby's device failed while its takeover waited for the backlog: the takeover is given up and the node exits and restarts (it waited for ever: afterDevice never answers a failed device)",
    path: (s) => s.takeoversDroppedForDevice,
  },
  {
    seed: 1644,
    what: "etcd, the same after the standby took the key: the old primary, which lost the key, discards its copy on meeting the claimed epoch (a double failure: docs/failure-model.md)",
    path: (s) => s.takeoversDroppedForDevice,
  },
  {
    seed: 2060,
    what: "peer, a degraded primary crashed while its granted standby, cut off, took over: its solo work is lost as the split brain allows (the checker judged it as held by the standby)",
    path: (s) => s.unreportedSoloLoss,
  },
];

/** The first seed whose run, in sync mode, crashes, pauses and partitions. */
function busySeed(): number {
  const kinds = (p: FailoverParams) => new Set(p.faults.map((f) => f.kind));
  const busy = (p: FailoverParams) => {
    const k = kinds(p);
    return p.ackMode === "sync" && k.has("crash") && k.has("pause") && k.has("partition");
  };
  let seed = 1;
  while (!busy(drawFailoverParams(seed))) seed++;
  return seed;
}
