// Proves a primary and a standby vgpud (real processes over loopback TCP, different device
// seeds) end as equal replicas under concurrent guest sessions running seeded random mixes of
// every call kind, MMIO stores and faults — in every replication mode with per-page MMIO, and
// sync with per-store MMIO — checked through the project's own verify and both nodes' digests;
// that a sync mode only acknowledges what the standby has received (sync) or applied
// (sync-applied), sampled under load, and holds replies while it is paused (both sync modes:
// the pause stops receipt and apply alike); and that async does not wait for a paused standby.
import { Session } from "@vgpu-ha/client";
import { CALL_OPS } from "@vgpu-ha/common";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openAndRun } from "../support/guest-workload.js";
import { MODES, type Mode } from "../support/modes.js";
import { digest, metrics, sleep, status, waitFor } from "../support/ops-client.js";
import { GUESTS, LONG_LEASE, ReplicationPair } from "../support/replication-pair.js";

const SESSIONS = 4;
const FRAMES = 450;

/**
 * Samples, while load runs, the primary's acknowledged seq and then how far the standby got:
 * its received seq in sync mode (applied where the node does not report received), its
 * applied seq in sync-applied.
 */
function sampleSyncInvariant(pair: ReplicationPair, mode: Mode) {
  let running = true;
  const acknowledged = new Set<number>();
  const violations: string[] = [];
  const primaryStates = new Set<string>();
  const done = (async () => {
    while (running) {
      const p = await status(pair.primary);
      // Read after the primary: applied only grows, so applied ≥ acknowledged must hold.
      const s = await status(pair.liveStandby);
      primaryStates.add(p.replication!.state);
      acknowledged.add(p.seq.acknowledged);
      const [held, what] =
        mode === "sync" && s.seq.received !== undefined
          ? [s.seq.received, "received"]
          : [s.seq.applied, "applied"];
      if (held < p.seq.acknowledged) {
        violations.push(`acknowledged ${p.seq.acknowledged} but standby ${what} ${held}`);
      }
      await sleep(5);
    }
  })();
  // A failed test may never call stop(): the loop then ends at its first failed read.
  done.catch(() => {
    running = false;
  });
  return {
    async stop() {
      running = false;
      await done;
      return { acknowledged, violations, primaryStates };
    },
  };
}

const SEEDS: Record<Mode, number> = { sync: 100, async: 300, "sync-applied": 400 };
const modes: readonly { mode: Mode; mmio: "per-page" | "per-store"; seed: number }[] = [
  ...MODES.map((mode) => ({ mode, mmio: "per-page" as const, seed: SEEDS[mode] })),
  // per-store MMIO changes what is shipped, not when it is acknowledged: one mode suffices.
  { mode: "sync", mmio: "per-store", seed: 200 },
];

describe.each(modes)("$mode replication, $mmio MMIO", ({ mode, mmio, seed }) => {
  let pair: ReplicationPair;
  const sessions: Session[] = [];

  beforeAll(async () => {
    pair = await ReplicationPair.start({
      // The pause tests stop the standby for a while: no failover may come of it.
      shared: { replication: { mode }, mmio: { replication: mmio }, lease: LONG_LEASE },
    });
    await pair.waitInSync();
  });
  afterAll(async () => {
    await Promise.all(sessions.map((s) => s.close().catch(() => undefined)));
    await pair?.stop();
  });

  it("ends with equal replicas after concurrent random guest sessions", async () => {
    const guest = { endpoint: pair.primary.guest, ...GUESTS.workload };
    const sampler = mode === "async" ? undefined : sampleSyncInvariant(pair, mode);
    const runs = await Promise.all(
      Array.from({ length: SESSIONS }, (_, i) => openAndRun(guest, seed + i, FRAMES)),
    );
    sessions.push(...runs.map((r) => r.session));
    const sync = await sampler?.stop();

    // Every result matched a local replay of its workload, and the mix was complete.
    for (const { report } of runs) expect(report.mismatches).toEqual([]);
    const kinds = new Set(runs.flatMap(({ report }) => [...report.kinds.keys()]));
    for (const kind of [...CALL_OPS, "stores", "fault"]) expect(kinds).toContain(kind);

    if (sync) {
      expect(sync.violations).toEqual([]);
      expect(sync.primaryStates).toEqual(new Set(["streaming"]));
      expect(sync.acknowledged.size).toBeGreaterThan(5); // sampled while acks advanced
    }

    // The state is far from empty, and the project's verify finds the replicas equal.
    const p = await status(pair.primary);
    expect(p.contexts).toBeGreaterThan(0);
    expect(p.bos).toBeGreaterThan(0);
    const verdict = await pair.verify();
    expect(verdict).toMatchObject({ equal: true });
    expect(verdict.standby).toBe(verdict.primary);

    // Both nodes' own digests, at the same seq, agree on every part.
    const [dp, ds] = await waitFor("the standby at the primary's seq", async () => {
      const both = await Promise.all([digest(pair.primary), digest(pair.liveStandby)]);
      return both[0].seq === both[1].seq ? both : undefined;
    });
    expect(ds.seq).toBeGreaterThanOrEqual(verdict.seq);
    expect({ gpu: ds.gpu, sessions: ds.sessions, state: ds.state }).toEqual({
      gpu: dp.gpu,
      sessions: dp.sessions,
      state: dp.state,
    });
    expect((await status(pair.liveStandby)).replication).toMatchObject({
      state: "replica",
      divergences: 0,
    });
    expect(await pair.roles()).toEqual(["primary@1", "standby@1"]);

    // The MMIO mode is the one configured: page batches, or one entry per store.
    const m = await metrics(pair.primary);
    const stores = m.get("vgpu_mmio_stores_total");
    const storeEntries = m.get("vgpu_replication_entries_total", { kind: "mmioStore" });
    const pageEntries = m.get("vgpu_replication_entries_total", { kind: "mmioPages" });
    expect(stores).toBeGreaterThan(100);
    if (mmio === "per-page") {
      expect(storeEntries).toBe(0);
      expect(m.get("vgpu_mmio_page_batches_total")).toBeGreaterThan(0);
      expect(pageEntries).toBeGreaterThan(0);
      expect(pageEntries).toBeLessThan(stores); // batching: fewer entries than stores
    } else {
      expect(m.get("vgpu_mmio_page_batches_total")).toBe(0);
      expect(storeEntries).toBeGreaterThanOrEqual(stores);
    }
  });

  // Pausing the standby is shown once per acknowledgement mode.
  if (mode !== "async" && mmio === "per-page") {
    it("holds a reply while the standby is paused, and releases it once applied", async () => {
      const session = await Session.open({ endpoint: pair.primary.guest, ...GUESTS.workload });
      sessions.push(session);
      const ctx = await session.createContext();
      const bo = await session.allocBo(ctx, 4096);
      const standby = pair.liveStandby;
      process.kill(standby.pid, "SIGSTOP");
      let write: Promise<string> | undefined;
      let held: { last: number; acknowledged: number; heldReplies: number };
      try {
        write = session.dmaWrite(ctx, bo, 0, new Uint8Array(64).fill(7)).then(() => "resolved");
        // A liveness-of-blocking check: the paused standby cannot have applied the write.
        const first = await Promise.race([write, sleep(1500).then(() => "still held")]);
        expect(first).toBe("still held");
        const p = await status(pair.primary);
        held = {
          last: p.seq.last,
          acknowledged: p.seq.acknowledged,
          heldReplies: p.replication!.heldReplies!,
        };
      } finally {
        process.kill(standby.pid, "SIGCONT");
      }
      expect(held.heldReplies).toBeGreaterThan(0);
      expect(held.acknowledged).toBeLessThan(held.last);
      expect(await write).toBe("resolved");
      // sync-applied: released once applied; sync: once received, applied by the device later.
      const atRelease = (await status(standby)).seq;
      expect(mode === "sync" ? atRelease.received! : atRelease.applied).toBeGreaterThanOrEqual(
        held.last,
      );
      await waitFor("the standby to apply the write", async () => {
        return (await status(standby)).seq.applied >= held.last;
      });
      expect(Buffer.from(await session.dmaRead(ctx, bo, 0, 64))).toEqual(Buffer.alloc(64, 7));
      expect(await pair.roles()).toEqual(["primary@1", "standby@1"]); // a pause, not a failover
      expect((await pair.verify()).equal).toBe(true);
    });
  }

  if (mode === "async") {
    it("acknowledges without waiting for a paused standby", async () => {
      const session = await Session.open({ endpoint: pair.primary.guest, ...GUESTS.workload });
      sessions.push(session);
      const ctx = await session.createContext();
      const bo = await session.allocBo(ctx, 4096);
      const standby = pair.liveStandby;
      const appliedBefore = (await status(standby)).seq.applied;
      process.kill(standby.pid, "SIGSTOP");
      let lag: number;
      try {
        for (let i = 0; i < 20; i++) {
          await session.dmaWrite(ctx, bo, i * 4, new Uint8Array(4).fill(i));
        }
        lag = (await status(pair.primary)).replication!.lag!.entries;
      } finally {
        process.kill(standby.pid, "SIGCONT");
      }
      // Twenty writes were acknowledged while the standby could apply nothing.
      expect(lag).toBeGreaterThanOrEqual(20);
      await waitFor("the standby to catch up", async () => {
        const [p, s] = await Promise.all([status(pair.primary), status(standby)]);
        return s.seq.applied === p.seq.last && s.seq.applied > appliedBefore;
      });
      expect((await pair.verify()).equal).toBe(true);
    });
  }
});
