// Proves (issue #14) that a standby promoted while it holds a received-but-unapplied backlog
// applies all of it before it serves, and that nothing acknowledged is lost: real processes,
// the default 500 ms lease, the standby's device slowed by testing.kernelDelayMs so it applies
// behind what it receives, guests of the chaos harness's load (every frame and reply recorded)
// running kernels, and a SIGKILL of the primary while the backlog stands. The new primary's
// first status as primary already covers everything the standby had received before the kill,
// and its final state is the reference replay of the guests' own frames: every acknowledged
// frame in it exactly once, every acknowledged reply the replay's. Run in sync (where replies
// leave on receipt, so the backlog holds acknowledged frames: sampled) and in sync-applied
// (where none leaves before it is applied: sampled too); async promises nothing on a kill.
import { afterEach, describe, expect, it } from "vitest";
import { GuestLoad } from "../chaos/load.js";
import { probeSession } from "../chaos/probe.js";
import { backendOptionsOf, type HeldSession, replayReference } from "../chaos/reference.js";
import { FailoverPair } from "../support/failover-pair.js";
import { MODES, type Mode } from "../support/modes.js";
import { digest, type NodeStatus, sleep, status, waitFor } from "../support/ops-client.js";

const GUEST = { tenant: "backlog", token: "backlog-tenant-token-1" };
/** The standby's device sleeps this long before every kernel: it falls behind the guests. */
const KERNEL_DELAY_MS = 25;
/** Entries received and not yet applied before the primary is killed. */
const BACKLOG_ENTRIES = 40;

let pair: FailoverPair | undefined;
let load: GuestLoad | undefined;
afterEach(async () => {
  await load?.stop(10_000);
  load = undefined;
  await pair?.cleanup();
  pair = undefined;
});

const t0 = performance.now();
const now = () => performance.now() - t0;

/** received − applied on a standby (0 where it does not report received). */
const backlogOf = (s: NodeStatus) => (s.seq.received ?? s.seq.applied) - s.seq.applied;

/** Samples both nodes until stopped: the largest backlog, and replies ahead of the apply. */
function sampleBacklog(p: FailoverPair) {
  let running = true;
  let maxBacklog = 0;
  let maxAckedAheadOfApplied = 0;
  const done = (async () => {
    while (running) {
      const a = await status(p.node("a"));
      // Read after the primary: the standby's seqs only grow.
      const b = await status(p.node("b"));
      maxBacklog = Math.max(maxBacklog, backlogOf(b));
      maxAckedAheadOfApplied = Math.max(maxAckedAheadOfApplied, a.seq.acknowledged - b.seq.applied);
      await sleep(10);
    }
  })();
  done.catch(() => {
    running = false;
  });
  return {
    get maxBacklog() {
      return maxBacklog;
    },
    async stop() {
      running = false;
      await done;
      return { maxBacklog, maxAckedAheadOfApplied };
    },
  };
}

/** Sessions as the final primary holds them: each guest's own count, or asked of the node. */
async function heldSessions(l: GuestLoad, endpoint: string): Promise<HeldSession[]> {
  const held: HeldSession[] = [];
  for (const s of l.sessions) {
    const unsure = s.failure !== undefined || s.frames.some((f) => f.outcome !== "ok");
    let lastFrame: number | undefined = s.frames.length;
    if (unsure) {
      const a = await probeSession(endpoint, GUEST, s.id);
      if (a.kind === "refused") throw new Error(`probe of ${s.id}: ${a.code} ${a.message}`);
      lastFrame = a.kind === "held" ? a.lastFrame : undefined;
    }
    held.push({ history: s, tenant: GUEST.tenant, lastFrame });
  }
  return held;
}

const syncModes = MODES.filter((m): m is Exclude<Mode, "async"> => m !== "async");

describe.each(syncModes)("a kill with a received-but-unapplied backlog, %s mode", (mode) => {
  it("the standby applies its backlog before it serves; nothing acknowledged is lost", async () => {
    pair = await FailoverPair.create(
      {
        replication: { mode },
        // The device on its own thread (the default is inline): the standby acks receipt at
        // once while its device applies later.
        device: { vramBytes: "512MiB", thread: "worker" },
        // The random workloads' "DMA too big" fault must be refused as such (as in chaos).
        limits: { maxDmaBytes: "1MiB" },
        tenants: [
          { name: GUEST.tenant, token: GUEST.token, vramQuotaBytes: "256MiB", boQuota: 100_000 },
        ],
      },
      async ([, b]) => {
        b.testing = { ...(b.testing as object), kernelDelayMs: KERNEL_DELAY_MS };
      },
    );
    await waitFor(
      "a streaming to its standby",
      async () => (await status(pair!.node("a"))).replication?.state === "streaming",
      { timeoutMs: 20_000 },
    );
    load = new GuestLoad({
      endpoints: pair.endpoints,
      ...GUEST,
      sessions: 4,
      rate: 240,
      seed: mode === "sync" ? 41 : 43,
      gemmSide: 0, // the standby's delay per kernel makes the backlog; no need for long ones
      now,
    }).start();
    const sampler = sampleBacklog(pair);
    await waitFor("a backlog on the standby", async () => sampler.maxBacklog >= BACKLOG_ENTRIES, {
      timeoutMs: 30_000,
      intervalMs: 20,
    });
    const seen = await sampler.stop();
    const before = await status(pair.node("b"));
    pair.node("a").process.kill("SIGKILL");
    expect(backlogOf(before)).toBeGreaterThan(0);
    if (mode === "sync") expect(seen.maxAckedAheadOfApplied).toBeGreaterThan(0);
    else expect(seen.maxAckedAheadOfApplied).toBeLessThanOrEqual(0);

    // The first status in which b is primary: its log holds everything it had received (its
    // device applied it before the promotion; the replay below checks the state).
    const promoted = await waitFor(
      "b promoted",
      async () => {
        const s = await status(pair!.node("b"));
        return s.role === "primary" ? s : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 5 },
    );
    expect(promoted.epoch).toBe(2);
    expect(promoted.seq.last).toBeGreaterThanOrEqual(before.seq.received!);

    // The guests carry on against b; then everything is checked against the replay.
    const acked = load.acked;
    await waitFor("acknowledgements from the new primary", async () => load!.acked > acked + 50, {
      timeoutMs: 30_000,
    });
    const { settled } = await load.stop(60_000);
    expect(settled).toBe(true);
    await load.readCounters();
    const node = pair.node("b");
    const held = await heldSessions(load, node.guest);
    const finalDigest = await digest(node);
    const reference = replayReference(backendOptionsOf(pair.config("b")), held);
    expect(reference.problems).toEqual([]);
    expect(reference.mismatches).toEqual([]);
    expect(finalDigest.state).toBe(reference.digest.state);

    const sessions = load.sessions;
    expect(load.internalErrors).toEqual([]);
    expect(sessions.filter((s) => s.failure).map((s) => s.failure!.message)).toEqual([]);
    const lost = held.flatMap((h) =>
      h.history.frames
        .filter((f) => f.outcome === "ok" && (h.lastFrame === undefined || f.number > h.lastFrame))
        .map((f) => `${h.history.id}#${f.number}`),
    );
    expect(lost).toEqual([]);
    for (const s of sessions) {
      const increments = s.frames.filter(
        (f) => f.kind === "increment" && f.outcome === "ok" && f.result?.code === 0,
      ).length;
      expect(increments).toBeGreaterThan(0);
      expect(s.counterRead).toBe(increments);
    }
  });
});
