// Proves a standby catches up with a busy primary holding 256 MiB of non-zero buffers, and
// ends equal each time (project verify, under load and at rest): started late, by a snapshot
// while the guests keep running; after the link breaks without a restart, from the retained
// log with no snapshot; after a SIGKILL in the middle of a snapshot, by a snapshot started
// over from scratch; after a cut in the middle of a snapshot, by resuming that snapshot; and
// after a SIGKILL under load and a restart, by a new snapshot. The link goes through a
// TCP proxy so it can be cut, and so the primary keeps one peer address across restarts.
// The standby pulls the snapshot's pages from the primary (the pages socket) through a second
// proxy: a pull cut part way is reopened from the chunk the standby reached, the same snapshot
// (TLS: tls.test.ts).
// In sync mode only: a catch-up (snapshot, resume from the retained log) ships and applies
// the same in every replication mode, and the grant that ends it rests on the applied seq in all.
import { readFileSync } from "node:fs";
import { buf, Session, u32 } from "@vgpu-ha/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GuestLoad } from "../support/guest-workload.js";
import { digest, type Metrics, metrics, status, waitFor } from "../support/ops-client.js";
import { GUESTS, ReplicationPair } from "../support/replication-pair.js";

const MiB = 1024 * 1024;
const BULK_BOS = 4;
const BULK_BO_BYTES = 64 * MiB;

const snapshots = (m: Metrics, event: "started" | "completed" | "resumed") =>
  m.get("vgpu_snapshots_total", { event });

/** Waits until `standby` holds more than `chunks` chunks of a snapshot; returns how many. */
const partWay = (standby: Parameters<typeof status>[0], chunks: number) =>
  waitFor(
    "the new standby part way through its snapshot",
    async () => {
      const r = (await status(standby)).replication!;
      const got = r.snapshot?.chunks ?? 0;
      return r.state === "snapshot" && got > chunks ? got : undefined;
    },
    { intervalMs: 5 },
  );

describe("standby catch-up with 256 MiB of buffers under load", () => {
  let pair: ReplicationPair;
  let bulk: Session | undefined;
  let bulkCtx = 0;
  const bulkBos: number[] = [];
  let load: GuestLoad | undefined;

  /** Frames the load finished from now until `done` resolves. */
  async function framesDuring<T>(done: Promise<T>): Promise<{ value: T; frames: number }> {
    const before = load!.framesDone;
    const value = await done;
    return { value, frames: load!.framesDone - before };
  }

  /** Waits for the load to finish `n` more frames (it is alive and unblocked). */
  async function loadProgresses(n: number): Promise<void> {
    const target = load!.framesDone + n;
    await waitFor(`the guest load to pass ${target} frames`, () => load!.framesDone >= target);
  }

  beforeAll(async () => {
    pair = await ReplicationPair.start({
      proxy: true,
      startStandby: false,
      shared: {
        device: { vramBytes: "512MiB" },
        replication: { mode: "sync", retainBytes: "256MiB", reconnectMs: 50 },
        // Long enough that a cut link redials well within it (no failover), short enough
        // that the primary goes on alone soon after its standby is killed.
        lease: { durationMs: 1500 },
      },
    });
    bulk = await Session.open({ endpoint: pair.primary.guest, ...GUESTS.bulk });
    bulkCtx = await bulk.createContext();
    for (let i = 0; i < BULK_BOS; i++) {
      const bo = await bulk.allocBo(bulkCtx, BULK_BO_BYTES);
      bulkBos.push(bo);
      // fill(dst, n, value): every u32 non-zero, so no page of the snapshot can be skipped.
      const value = u32(0x01020304 * (i + 1));
      await bulk.launch(bulkCtx, "fill", [buf(bo), u32(BULK_BO_BYTES / 4), value]);
    }
    load = new GuestLoad(
      { endpoint: pair.primary.guest, ...GUESTS.workload },
      { sessions: 2, frames: 300, seed: 5000, framesPerSecond: 300 },
    ).start();
    await loadProgresses(200);
  });

  afterAll(async () => {
    await load?.stop().catch(() => undefined);
    await load?.close().catch(() => undefined);
    await bulk?.close().catch(() => undefined);
    await pair?.stop();
  });

  it("catches up a late standby by snapshot while the guests keep running", async () => {
    const before = await metrics(pair.primary);
    expect((await status(pair.primary)).replication!.state).not.toBe("streaming");
    const standby = await pair.startStandby();

    // Sample the primary during the transfer: guests must progress while it is in "snapshot".
    const duringSnapshot: number[] = [];
    const { value: inSync } = await framesDuring(
      waitFor("primary streaming to a replica", async () => {
        const [p, s] = await Promise.all([status(pair.primary), status(standby)]);
        if (p.replication!.state === "snapshot") duringSnapshot.push(load!.framesDone);
        return p.replication!.state === "streaming" && s.replication!.state === "replica"
          ? { p, s }
          : undefined;
      }),
    );
    expect(duringSnapshot.length).toBeGreaterThan(1);
    expect(duringSnapshot.at(-1)!).toBeGreaterThan(duringSnapshot[0]!);

    const after = await metrics(pair.primary);
    expect(snapshots(after, "started")).toBe(snapshots(before, "started") + 1);
    expect(snapshots(after, "completed")).toBe(snapshots(before, "completed") + 1);
    // Every bulk page is non-zero: the whole 256 MiB crossed the link.
    expect(inSync.p.replication!.lastSnapshot!.bytes).toBeGreaterThanOrEqual(
      BULK_BOS * BULK_BO_BYTES,
    );
    expect(inSync.s.bos).toBeGreaterThanOrEqual(BULK_BOS);

    // Equal while the load runs (a checkpoint mid-stream) …
    expect((await pair.verify()).equal).toBe(true);
    await loadProgresses(100);
  });

  it("resumes from the retained log after a broken link, without a snapshot", async () => {
    await pair.waitInSync();
    const standby = pair.liveStandby;
    const before = await metrics(pair.primary);
    const connectionsBefore = pair.proxy!.accepted;
    pair.proxy!.breakAll();
    await waitFor("a resume from the retained log", async () => {
      const m = await metrics(pair.primary);
      return m.get("vgpu_replication_resumes_total") > before.get("vgpu_replication_resumes_total");
    });
    await pair.waitInSync();
    await loadProgresses(100);

    const after = await metrics(pair.primary);
    expect(pair.proxy!.accepted).toBeGreaterThan(connectionsBefore); // a new connection …
    expect(standby.process.exitCode).toBeNull(); // … to the same standby process
    expect(after.get("vgpu_replication_resumes_total")).toBe(
      before.get("vgpu_replication_resumes_total") + 1,
    );
    expect(snapshots(after, "started")).toBe(snapshots(before, "started"));
    expect(snapshots(after, "completed")).toBe(snapshots(before, "completed"));
    expect((await status(standby)).replication).toMatchObject({ state: "replica", divergences: 0 });
    expect((await pair.verify()).equal).toBe(true);
  });

  it("starts over cleanly when the standby restarts in the middle of a snapshot", async () => {
    await pair.waitInSync();
    await pair.killStandby();
    const before = await metrics(pair.primary);
    const doomed = await pair.startStandby();
    // Kill it as soon as it holds part of the snapshot.
    const partial = await partWay(doomed, 0);
    await pair.killStandby();
    const mid = await metrics(pair.primary);
    expect(partial).toBeGreaterThan(0);
    expect(snapshots(mid, "completed")).toBe(snapshots(before, "completed"));

    await pair.startStandby();
    await pair.waitInSync();
    const after = await metrics(pair.primary);
    // Two snapshots started (the killed one, and one from scratch); one completed; none was
    // resumed: the restarted process had nothing to resume from.
    expect(snapshots(after, "started")).toBe(snapshots(before, "started") + 2);
    expect(snapshots(after, "completed")).toBe(snapshots(before, "completed") + 1);
    expect(snapshots(after, "resumed")).toBe(snapshots(before, "resumed"));
    expect((await pair.verify()).equal).toBe(true);
  });

  it("resumes a snapshot where it stopped when the link is cut in the middle of it", async () => {
    await pair.waitInSync();
    await pair.killStandby();
    const before = await metrics(pair.primary);
    const standby = await pair.startStandby();
    const cutAt = await partWay(standby, 0);
    pair.proxy!.breakAll();
    await pair.waitInSync();

    const after = await metrics(pair.primary);
    // One snapshot, picked up again after the cut rather than started over.
    expect(snapshots(after, "started")).toBe(snapshots(before, "started") + 1);
    expect(snapshots(after, "resumed")).toBe(snapshots(before, "resumed") + 1);
    expect(snapshots(after, "completed")).toBe(snapshots(before, "completed") + 1);
    expect(cutAt).toBeGreaterThan(0);
    expect(standby.process.exitCode).toBeNull();
    expect((await pair.verify()).equal).toBe(true);
  });

  it("reopens a snapshot pull cut in the middle, from where it stopped", async () => {
    await pair.waitInSync();
    await pair.killStandby();
    const before = await metrics(pair.primary);
    const standby = await pair.startStandby();
    const cutAt = await partWay(standby, 1);
    pair.pullProxy.breakAll();
    await pair.waitInSync();

    const after = await metrics(pair.primary);
    // The same snapshot went on (nothing started over, the stream was never cut) …
    expect(snapshots(after, "started")).toBe(snapshots(before, "started") + 1);
    expect(snapshots(after, "completed")).toBe(snapshots(before, "completed") + 1);
    expect(snapshots(after, "resumed")).toBe(snapshots(before, "resumed"));
    // … over a second pull, opened after the cut.
    const s = await status(standby);
    expect(cutAt).toBeGreaterThan(1);
    expect(s.replication!.snapshotPulls).toBeGreaterThanOrEqual(2);
    // Every page read off the socket straight into the replica's buffers, the cut chunk's too
    // (the CPU model's device memory is the main thread's to write): none copied.
    expect(s.replication!.snapshotPulledBytes!.inPlace).toBeGreaterThan(0);
    expect(s.replication!.snapshotPulledBytes!.copied).toBe(0);
    // Over the pages socket (plaintext: routed by its first byte), not PullSnapshot.
    const log = readFileSync(pair.primary.logFile, "utf8");
    const overSocket = (l: string) =>
      l.includes("snapshot pull opened") && l.includes('"remote":"pages:');
    expect(log.split("\n").some(overSocket)).toBe(true);
    expect((await pair.verify()).equal).toBe(true);
  });

  it("re-snapshots a standby killed with SIGKILL under load and restarted", async () => {
    // Most of the bulk data goes first (the 256 MiB transfer is proven above): frees are
    // replicated, and the new snapshot holds only what is left.
    for (const bo of bulkBos.splice(1)) await bulk!.freeBo(bulkCtx, bo);
    await pair.waitInSync();
    const before = await metrics(pair.primary);
    await pair.killStandby();
    // The primary serves on alone meanwhile (sync does not wait for a missing standby).
    await loadProgresses(100);
    await pair.startStandby();
    await pair.waitInSync();
    await loadProgresses(50);

    const after = await metrics(pair.primary);
    expect(snapshots(after, "started")).toBe(snapshots(before, "started") + 1);
    expect(snapshots(after, "completed")).toBe(snapshots(before, "completed") + 1);
    expect(after.get("vgpu_replication_resumes_total")).toBe(
      before.get("vgpu_replication_resumes_total"),
    );
    // One bulk buffer (and the load's small ones) is all the new standby holds.
    const vram = (await status(pair.liveStandby)).vram as { usedBytes: number };
    expect(vram.usedBytes).toBeGreaterThanOrEqual(BULK_BO_BYTES);
    expect(vram.usedBytes).toBeLessThan(2 * BULK_BO_BYTES);
    expect((await pair.verify()).equal).toBe(true);
  });

  it("is equal at rest once the load stops", async () => {
    const stopped = await load!.stop();
    expect(stopped.mismatches).toEqual([]);
    expect(stopped.workloads).toBeGreaterThan(2);
    const verdict = await pair.verify();
    expect(verdict.equal).toBe(true);
    const [dp, ds] = await Promise.all([digest(pair.primary), digest(pair.liveStandby)]);
    expect(ds.seq).toBe(dp.seq);
    expect(ds.state).toBe(dp.state);
    const s = await status(pair.liveStandby);
    expect(s.replication).toMatchObject({ state: "replica", divergences: 0 });
    expect(s.contexts).toBe((await status(pair.primary)).contexts);
    // Kills, restarts and a cut link, and never a failover: the same primary, epoch 1.
    expect(await pair.roles()).toEqual(["primary@1", "standby@1"]);
  });
});
