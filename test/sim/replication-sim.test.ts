// Proves replication is safe and live under a faulty network and asynchronous devices: a
// thousand seeded simulations of the real Sequencer, Sender, Receiver and release rule (delay,
// loss, duplication, reordering, broken links, late and restarted standbys, devices of random
// latency on both nodes) in the three ack modes, with no double apply, no gap, no reply before
// the primary's device had it, no sync reply before the standby received it, no sync-applied
// reply before it applied it, no promotion before the received backlog was applied, no entry
// applied by a holding standby (async, sync) before the primary's device had done it, and equal
// replicas once healed; and that a seed replays exactly.
import { describe, expect, it } from "vitest";
import { drawParams, type SimParams } from "./params.js";
import { formatResult, formatSummary, runSeeds } from "./run-seeds.js";
import { simulate } from "./simulation.js";

const SEEDS = Number(process.env["SIM_SEEDS"] ?? 1000);
const BASE_SEED =
  process.env["SIM_SEED"] === "random"
    ? Math.floor(Math.random() * 2 ** 31)
    : Number(process.env["SIM_SEED"] ?? 1);
/** Failures printed in full; the rest are listed by seed. */
const SHOWN_FAILURES = 5;
/** About 10 s of CPU for 1000 seeds; room for a loaded machine running other test files. */
const TIMEOUT_MS = 180_000;

describe("replication simulation", () => {
  it(
    `holds safety and liveness for ${SEEDS} seeds`,
    () => {
      console.log(
        `replication sim: ${SEEDS} seeds from base seed ${BASE_SEED} (SIM_SEEDS, SIM_SEED)`,
      );
      const report = runSeeds(BASE_SEED, SEEDS);
      console.log(formatSummary(report));
      const shown = report.failures.slice(0, SHOWN_FAILURES).map(formatResult);
      expect(report.failures.length, `${formatSummary(report)}\n\n${shown.join("\n\n")}`).toBe(0);
      if (SEEDS < 500) return; // too few runs to expect every path
      // Every path was taken somewhere, or the runs above proved less than they seem to.
      const t = report.totals;
      for (const [path, count] of Object.entries({
        syncRepliesChecked: t.repliesSync,
        repliesBeforeStandbyApplied: t.repliesBeforeStandbyApplied,
        promotionProbes: t.promotionProbes,
        promotionBacklogWaits: t.promotionBacklogWaits,
        holdChecked: t.holdChecked,
        holdsSeen: t.holdsSeen,
        degradedReplies: t.repliesDegraded,
        snapshotsInstalled: t.snapshotsInstalled,
        snapshotsResumed: t.snapshotsResumed,
        resumedFromLog: t.resumedFromLog,
        gapResyncs: t.gapResyncs,
        standbyRestarts: t.standbyRestarts,
        disconnects: t.disconnects,
        checkpoints: t.checkpoints,
        messagesDropped: t.messagesDropped,
        messagesDuplicated: t.messagesDuplicated,
        messagesReordered: t.messagesReordered,
      })) {
        expect(count, `${path} never happened`).toBeGreaterThan(0);
      }
    },
    TIMEOUT_MS,
  );

  it("replays a seed exactly", () => {
    const seed = busySeed();
    const first = simulate(drawParams(seed));
    const second = simulate(drawParams(seed));
    expect(first.failure).toBeUndefined();
    expect(second).toEqual(first);
    expect(first.stats.messagesDropped + first.stats.disconnects).toBeGreaterThan(0);
  });
});

/** The first seed whose run has every kind of fault, in sync mode. */
function busySeed(): number {
  const busy = (p: SimParams) =>
    p.ackMode === "sync" &&
    p.standbyRestartsPerSec > 0 &&
    p.network.dropRate > 0 &&
    p.network.dupRate > 0 &&
    p.network.reorderRate > 0 &&
    p.network.disconnectsPerSec > 0;
  let seed = 1;
  while (!busy(drawParams(seed))) seed++;
  return seed;
}
