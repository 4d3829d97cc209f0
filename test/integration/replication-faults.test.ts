// Proves the pair survives faults and ends equal: a standby buffer corrupted by test-only fault
// injection is caught by the next call that reads it, or by verify, and the standby resyncs by
// snapshot; a stalled standby in async mode makes the primary hold guests back while its log
// stays within the configured lag bound, and everything completes once the standby resumes;
// garbage on the standby's replication port is refused without a crash.
// A divergence is caught the same way in every replication mode (shown in sync); the stalled
// standby is the async case by design (the sync modes hold replies anyway: replication-workload).

import { connect } from "node:net";
import * as grpc from "@grpc/grpc-js";
import { Session } from "@vgpu-ha/client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  corrupt,
  digest,
  type Metrics,
  metrics,
  sleep,
  status,
  waitFor,
} from "../support/ops-client.js";
import { rawStream } from "../support/raw-grpc.js";
import { GUESTS, LONG_LEASE, OPS_TOKEN, ReplicationPair } from "../support/replication-pair.js";

const MiB = 1024 * 1024;

/** The two nodes' digests once they are at the same seq. */
async function digestsAtSameSeq(pair: ReplicationPair) {
  return waitFor("both nodes at one seq", async () => {
    const both = await Promise.all([digest(pair.primary), digest(pair.liveStandby)]);
    return both[0].seq === both[1].seq ? both : undefined;
  });
}

describe("divergence", () => {
  let pair: ReplicationPair;
  let session: Session;
  let ctx: number;
  let bo: number;
  const pattern = Uint8Array.from({ length: 8192 }, (_, i) => (i * 7 + 1) & 0xff);

  beforeAll(async () => {
    pair = await ReplicationPair.start();
    await pair.waitInSync();
    session = await Session.open({ endpoint: pair.primary.guest, ...GUESTS.workload });
    ctx = await session.createContext();
    bo = await session.allocBo(ctx, pattern.length);
    await session.dmaWrite(ctx, bo, 0, pattern);
    expect((await pair.verify()).equal).toBe(true);
  });
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await pair?.stop();
  });

  async function counters() {
    const [p, s] = await Promise.all([metrics(pair.primary), metrics(pair.liveStandby)]);
    return {
      standbyDivergences: s.get("vgpu_divergences_total"),
      primaryDivergences: p.get("vgpu_divergences_total"),
      snapshotsStarted: p.get("vgpu_snapshots_total", { event: "started" }),
      snapshotsCompleted: p.get("vgpu_snapshots_total", { event: "completed" }),
    };
  }

  it("is caught by the next call that reads the corrupted buffer; the standby resyncs", async () => {
    const before = await counters();
    // The lowest buffer of the lowest context is ours; one byte of it flips on the standby only.
    expect(await corrupt(pair.liveStandby, OPS_TOKEN)).toEqual({ context: ctx, bo, offset: 0 });
    const [dp, ds] = await digestsAtSameSeq(pair);
    expect(ds.gpu).not.toBe(dp.gpu);

    // The guest gets the primary's true bytes; the standby, replaying the read, gets other
    // bytes, so its result summary differs from the primary's: divergence.
    expect(Buffer.from(await session.dmaRead(ctx, bo, 0, 256))).toEqual(
      Buffer.from(pattern.subarray(0, 256)),
    );
    await waitFor("the standby to report the divergence", async () => {
      const s = await status(pair.liveStandby);
      return s.replication!.divergences! >= 1;
    });
    await pair.waitInSync();

    const after = await counters();
    expect(after.standbyDivergences).toBe(before.standbyDivergences + 1);
    expect(after.primaryDivergences).toBe(before.primaryDivergences + 1);
    expect(after.snapshotsStarted).toBe(before.snapshotsStarted + 1);
    expect(after.snapshotsCompleted).toBe(before.snapshotsCompleted + 1);
    expect((await status(pair.liveStandby)).replication).toMatchObject({
      state: "replica",
      eligible: true,
    });
    expect((await pair.verify()).equal).toBe(true);
    const [dp2, ds2] = await digestsAtSameSeq(pair);
    expect(ds2.state).toBe(dp2.state);
  });

  it("is caught by verify when no call touches it; the standby resyncs", async () => {
    const before = await counters();
    await corrupt(pair.liveStandby, OPS_TOKEN);
    const verdict = await pair.verify();
    expect(verdict.equal).toBe(false);
    expect(verdict.standby).not.toBe(verdict.primary);
    await waitFor("the standby to resync after the failed verify", async () => {
      const c = await counters();
      return c.snapshotsCompleted > before.snapshotsCompleted;
    });
    await pair.waitInSync();
    const after = await counters();
    expect(after.standbyDivergences).toBe(before.standbyDivergences + 1);
    expect((await pair.verify()).equal).toBe(true);
    // The guest's data was never touched.
    expect(Buffer.from(await session.dmaRead(ctx, bo, 0, pattern.length))).toEqual(
      Buffer.from(pattern),
    );
  });
});

describe("a stalled standby in async mode", () => {
  const MAX_LAG_BYTES = 8 * MiB;
  const WRITE_BYTES = 64 * 1024;
  const FRAMES_PER_MESSAGE = 16;
  const WRITES = 400; // 25 MiB: three times the bound
  let pair: ReplicationPair;
  let session: Session | undefined;

  beforeAll(async () => {
    pair = await ReplicationPair.start({
      shared: {
        replication: {
          mode: "async",
          maxLagEntries: 2000,
          maxLagBytes: MAX_LAG_BYTES,
          retainBytes: 0,
        },
        lease: LONG_LEASE, // the standby is stopped for a while: no failover may come of it
      },
    });
    await pair.waitInSync();
  });
  afterEach(() => {
    // Never leave the standby stopped, whatever failed.
    if (pair?.standby?.process.exitCode === null) pair.standby.process.kill("SIGCONT");
  });
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await pair?.stop();
  });

  it("holds guests back instead of growing its log, and completes once the standby resumes", async () => {
    session = await Session.open({
      endpoint: pair.primary.guest,
      ...GUESTS.workload,
      maxFramesPerMessage: FRAMES_PER_MESSAGE,
    });
    const ctx = await session.createContext();
    const bo = await session.allocBo(ctx, 4 * WRITE_BYTES);
    const standby = pair.liveStandby;
    // What the log may hold: the lag bound, plus the one guest message that crossed it.
    const bound = MAX_LAG_BYTES + FRAMES_PER_MESSAGE * (WRITE_BYTES + 1024);

    process.kill(standby.pid, "SIGSTOP");
    let completed = 0;
    const writes: Promise<void>[] = [];
    const held: number[] = [];
    const lastSeqs: number[] = [];
    try {
      for (let i = 0; i < WRITES; i++) {
        const data = new Uint8Array(WRITE_BYTES).fill(i & 0xff);
        writes.push(
          session.dmaWrite(ctx, bo, (i % 4) * WRITE_BYTES, data).then(() => {
            completed++;
          }),
        );
      }
      await waitFor("back-pressure (lag beyond the bound)", async () => {
        const p = await status(pair.primary);
        return p.replication!.lag!.bytes! > MAX_LAG_BYTES;
      });
      // While the standby stays stopped: the log stays bounded and the guest stays held.
      for (let i = 0; i < 8; i++) {
        const p = await status(pair.primary);
        held.push(p.replication!.log!.heldBytes);
        lastSeqs.push(p.seq.last);
        await sleep(200);
      }
    } finally {
      process.kill(standby.pid, "SIGCONT");
    }
    for (const bytes of held) expect(bytes).toBeLessThanOrEqual(bound);
    expect(Math.max(...held)).toBeGreaterThan(MAX_LAG_BYTES / 2); // it did fill up to the bound
    expect(lastSeqs.at(-1)).toBe(lastSeqs.at(-3)); // nothing new was taken in meanwhile
    const completedWhileStopped = completed;
    expect(completedWhileStopped).toBeLessThan(WRITES);

    await Promise.all(writes);
    expect(completed).toBe(WRITES);
    await waitFor("the standby to catch up", async () => {
      const [p, s] = await Promise.all([status(pair.primary), status(standby)]);
      return s.seq.applied === p.seq.last;
    });
    expect((await status(pair.primary)).replication!.log!.heldBytes).toBeLessThanOrEqual(bound);
    expect(await pair.roles()).toEqual(["primary@1", "standby@1"]); // a stall, not a failover
    expect((await pair.verify()).equal).toBe(true);
    // The last write to each quarter of the buffer is what it holds.
    for (let q = 0; q < 4; q++) {
      const last = WRITES - 4 + q;
      const got = await session.dmaRead(ctx, bo, q * WRITE_BYTES, 16);
      expect(Buffer.from(got)).toEqual(Buffer.alloc(16, last & 0xff));
    }
  });
});

describe("garbage on the replication port", () => {
  let pair: ReplicationPair;
  let session: Session | undefined;
  let before: Metrics;

  beforeAll(async () => {
    pair = await ReplicationPair.start({
      // Any stream opened on the standby's port displaces the primary's (standby-link.ts
      // accept()); the primary redials and resumes well within this lease.
      shared: { replication: { retainBytes: "64MiB" }, lease: { durationMs: 1500 } },
    });
    await pair.waitInSync();
    session = await Session.open({ endpoint: pair.primary.guest, ...GUESTS.workload });
    const ctx = await session.createContext();
    await session.allocBo(ctx, 4096);
    before = await metrics(pair.primary);
  });
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await pair?.stop();
  });

  it("refuses malformed messages and raw bytes, and stays an equal replica", async () => {
    const address = pair.liveStandby.replication!;
    // Not HTTP/2 at all.
    await new Promise<void>((resolve) => {
      const socket = connect(Number(address.split(":")[1]), "127.0.0.1", () => {
        socket.end(Buffer.from("GET / HTTP/1.0\r\n\r\n\x00\xff\x00\xff garbage"));
      });
      socket.on("data", () => undefined);
      socket.on("error", () => resolve());
      socket.on("close", () => resolve());
    });
    // A gRPC stream whose message is not a valid PrimaryMessage.
    const { client: raw, stream } = rawStream(address, "/vgpu.v1.Replication/Stream");
    const ended = new Promise<grpc.StatusObject>((resolve) => stream.on("status", resolve));
    stream.on("error", () => undefined);
    stream.on("data", () => undefined);
    stream.write(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02]));
    stream.end();
    expect((await ended).code).not.toBe(grpc.status.OK);
    raw.close();

    // The standby is alive, back in sync (the primary had to redial), and equal, with no
    // snapshot and no failover.
    expect(pair.liveStandby.process.exitCode).toBeNull();
    await pair.waitInSync();
    const ctx = await session!.createContext();
    expect(ctx).toBeGreaterThan(0);
    expect((await pair.verify()).equal).toBe(true);
    const after = await metrics(pair.primary);
    expect(after.get("vgpu_snapshots_total", { event: "started" })).toBe(
      before.get("vgpu_snapshots_total", { event: "started" }),
    );
    expect(await pair.roles()).toEqual(["primary@1", "standby@1"]);
  });
});
