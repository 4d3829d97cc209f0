// Proves failover with real processes and the default 500 ms lease: the primary killed or
// paused under load from several sessions → the standby promotes, every session resumes, and
// each guest's counters show every acknowledged frame applied exactly once (increments are
// not idempotent); the paused primary steps down when it wakes and rejoins; a killed standby
// leaves the primary degraded until it rejoins; replicas verify equal afterwards.
// The kill of the primary and the planned switchover run in every replication mode (what a
// mode promises is exactly what they test: in async a kill may lose acknowledged frames, but
// only with the loss reported to the guest; a switchover loses nothing in any mode). The
// pause, the standby kill and the refusals do not depend on the mode: they run in sync only.

import { ErrorCode, SessionClosedError } from "@vgpu-ha/client";
import { afterEach, describe, expect, it } from "vitest";
import type { CountingGuest } from "../support/counting-guest.js";
import { ADMIN, FailoverPair, startGuests, stopAndCheckGuests } from "../support/failover-pair.js";
import { keepsAcknowledged, MODES, type Mode } from "../support/modes.js";
import { metrics, sleep, status, verify, waitFor } from "../support/ops-client.js";

let pair: FailoverPair | undefined;
afterEach(async () => {
  await pair?.cleanup();
  pair = undefined;
});

async function streaming(p: FailoverPair, primary: "a" | "b") {
  await waitFor(
    `${primary} streaming to its standby`,
    async () => (await status(p.node(primary))).replication?.state === "streaming",
    { timeoutMs: 20_000 },
  );
}

async function stopAndCheck(gs: CountingGuest[]) {
  for (const increments of await stopAndCheckGuests(gs)) expect(increments).toBeGreaterThan(0);
}

/** A failed session's error, if the guest's session has failed (async: a reported loss). */
function failure(g: CountingGuest): SessionClosedError | undefined {
  const e = g.failure;
  return e instanceof SessionClosedError ? e : undefined;
}

/**
 * After a kill: each guest checked exactly once; in async mode a guest whose session failed
 * must have been told its acknowledged frames were lost (never a silent loss), and at least
 * one guest must have carried on.
 */
async function stopAndCheckAfterKill(mode: Mode, gs: CountingGuest[]) {
  const failed = gs.filter((g) => g.failure !== undefined);
  if (keepsAcknowledged(mode)) expect(failed.map((g) => String(g.failure))).toEqual([]);
  for (const g of failed) {
    expect(failure(g)?.code).toBe(ErrorCode.FRAME_OUT_OF_ORDER);
    expect(failure(g)?.message).toMatch(/\d+ lost \(async failover\)/);
  }
  const alive = gs.filter((g) => g.failure === undefined);
  expect(alive.length).toBeGreaterThan(0);
  await stopAndCheck(alive);
}

describe.each(MODES)("failover in %s mode", (mode) => {
  const replication = { replication: { mode } };

  it("SIGKILL of the primary: the standby takes over, guests resume exactly once, the old primary rejoins", async () => {
    pair = await FailoverPair.create(replication);
    await streaming(pair, "a");
    const gs = await startGuests(pair, 3);
    await sleep(700);
    pair.node("a").process.kill("SIGKILL");
    await waitFor("b promoted", async () => (await status(pair!.node("b"))).role === "primary", {
      timeoutMs: 10_000,
    });
    const b = await status(pair.node("b"));
    expect(b.epoch).toBe(2);
    const before = gs.map((g) => g.increments);
    await waitFor(
      "every guest acknowledged again after the failover (or, in async, told of a loss)",
      async () => gs.every((g, i) => g.increments > before[i]! || g.failure !== undefined),
      { timeoutMs: 15_000 },
    );
    const carriedOn = gs.filter((g) => g.failure === undefined);
    for (const g of carriedOn) expect(g.session.resumes).toBeGreaterThanOrEqual(1);
    expect(carriedOn.every((g) => g.session.epoch === 2)).toBe(true);
    // the old primary comes back: it finds a primary at epoch 2 and joins as its standby
    await pair.start("a");
    await waitFor(
      "a rejoined as a replica",
      async () => (await status(pair!.node("a"))).replication?.state === "replica",
      { timeoutMs: 20_000 },
    );
    expect((await status(pair.node("a"))).role).toBe("standby");
    await stopAndCheckAfterKill(mode, gs);
    const v = await verify(pair.node("b"), ADMIN);
    expect(v.equal).toBe(true);
    expect(
      (await metrics(pair.node("b"))).get("vgpu_promotions_total", { reason: "lease_expired" }),
    ).toBe(1);
  });

  it("switchover under load: the standby takes over without a snapshot, nothing lost or repeated", async () => {
    pair = await FailoverPair.create(replication);
    await streaming(pair, "a");
    const gs = await startGuests(pair, 3);
    await sleep(500);
    const snapshotsBefore = (await metrics(pair.node("a"))).get("vgpu_snapshots_total", {
      event: "started",
    });
    const res = await fetch(`${pair.node("a").ops}/v1/switchover`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    const body = (await res.json()) as {
      seq: number;
      pauseMs: number;
      role: string;
      epoch: number;
    };
    expect(res.status).toBe(200);
    expect(body).toMatchObject({ role: "standby", epoch: 2 });
    await waitFor("b primary", async () => (await status(pair!.node("b"))).role === "primary", {
      timeoutMs: 5000,
    });
    const before = gs.map((g) => g.increments);
    await waitFor(
      "guests acknowledged by the new primary",
      async () => gs.every((g, i) => g.increments > before[i]!),
      {
        timeoutMs: 15_000,
      },
    );
    await waitFor(
      "b streaming to a, its replica again",
      async () => (await status(pair!.node("b"))).replication?.state === "streaming",
      {
        timeoutMs: 10_000,
      },
    );
    await stopAndCheck(gs);
    // no snapshot anywhere: a stayed a replica with its own state
    const mb = await metrics(pair.node("b"));
    expect(mb.get("vgpu_snapshots_total", { event: "started" })).toBe(0);
    expect(mb.get("vgpu_replication_resumes_total")).toBeGreaterThanOrEqual(1);
    expect(mb.get("vgpu_promotions_total", { reason: "switchover" })).toBe(1);
    const ma = await metrics(pair.node("a"));
    expect(ma.get("vgpu_snapshots_total", { event: "started" })).toBe(snapshotsBefore);
    expect(ma.get("vgpu_demotions_total", { reason: "switchover" })).toBe(1);
    expect((await verify(pair.node("b"), ADMIN)).equal).toBe(true);
  });
});

// The mode changes nothing here: a paused primary, a dead standby, an operator's refusals.
describe("failover (sync mode)", () => {
  it("SIGSTOP of the primary past the lease: takeover; on SIGCONT it steps down having acknowledged nothing alone", async () => {
    pair = await FailoverPair.create();
    await streaming(pair, "a");
    const gs = await startGuests(pair, 2);
    await sleep(500);
    const a = pair.node("a");
    process.kill(a.pid, "SIGSTOP");
    try {
      await waitFor("b promoted", async () => (await status(pair!.node("b"))).role === "primary", {
        timeoutMs: 10_000,
      });
      const before = gs.map((g) => g.increments);
      await waitFor(
        "guests acknowledged by the new primary",
        async () => gs.every((g, i) => g.increments > before[i]!),
        { timeoutMs: 15_000 },
      );
    } finally {
      process.kill(a.pid, "SIGCONT");
    }
    await waitFor(
      "the woken primary stepped down",
      async () => (await status(a)).role === "standby",
      { timeoutMs: 10_000 },
    );
    const m = await metrics(a);
    // it may have applied frames after waking, but acknowledged none of them
    expect(m.get("vgpu_split_brain_discarded_total", { what: "acknowledged_frames" })).toBe(0);
    expect(m.get("vgpu_demotions_total", { reason: "higher_epoch" })).toBe(1);
    await waitFor(
      "a resynced as a replica",
      async () => (await status(a)).replication?.state === "replica",
      { timeoutMs: 20_000 },
    );
    await stopAndCheck(gs);
    expect((await verify(pair.node("b"), ADMIN)).equal).toBe(true);
  });

  it("SIGKILL of the standby: the primary serves degraded, then the restarted standby resyncs", async () => {
    pair = await FailoverPair.create();
    await streaming(pair, "a");
    const gs = await startGuests(pair, 2);
    await sleep(300);
    pair.node("b").process.kill("SIGKILL");
    await waitFor("a degraded", async () => (await status(pair!.node("a"))).degraded === true, {
      timeoutMs: 10_000,
    });
    const before = gs.map((g) => g.increments);
    await waitFor(
      "guests acknowledged while degraded",
      async () => gs.every((g, i) => g.increments > before[i]!),
      { timeoutMs: 10_000 },
    );
    expect((await metrics(pair.node("a"))).get("vgpu_degraded")).toBe(1);
    await pair.start("b");
    await waitFor(
      "a leased again",
      async () => (await status(pair!.node("a"))).degraded === false,
      { timeoutMs: 20_000 },
    );
    // The lease returns as soon as the restarted standby acknowledges heartbeats, which it does
    // while its snapshot is still arriving; verify needs it streaming.
    await streaming(pair, "a");
    await stopAndCheck(gs);
    expect((await status(pair.node("a"))).role).toBe("primary");
    expect((await verify(pair.node("a"), ADMIN)).equal).toBe(true);
  });

  it("refuses to promote an ineligible standby or demote without a standby, unless forced", async () => {
    pair = await FailoverPair.create();
    await streaming(pair, "a");
    const post = (node: "a" | "b", path: string) =>
      fetch(`${pair!.node(node).ops}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN}` },
      });
    // the primary is not a standby; the standby is not a primary
    const notStandby = await post("a", "/v1/promote");
    expect(notStandby.status).toBe(409);
    expect(await notStandby.json()).toMatchObject({ code: "NOT_STANDBY" });
    const notPrimary = await post("b", "/v1/switchover");
    expect(notPrimary.status).toBe(409);
    expect(await notPrimary.json()).toMatchObject({ code: "NOT_PRIMARY" });
    // without a token: refused
    expect((await fetch(`${pair.node("a").ops}/v1/switchover`, { method: "POST" })).status).toBe(
      401,
    );
    // standby gone: demote is refused, then forced
    pair.node("b").process.kill("SIGKILL");
    await waitFor("a degraded", async () => (await status(pair!.node("a"))).degraded === true, {
      timeoutMs: 10_000,
    });
    const refused = await post("a", "/v1/demote");
    expect(refused.status).toBe(409);
    const why = (await refused.json()) as { code: string; message: string };
    expect(why.code).toBe("HANDOVER_FAILED");
    expect(why.message).toMatch(/force/);
    const forced = await post("a", "/v1/demote?force=true");
    expect(forced.status).toBe(200);
    expect((await status(pair.node("a"))).role).toBe("standby");
  });

  it("refuses to promote the standby of a healthy, leased primary (PRIMARY_LEASED); forced, it promotes", async () => {
    pair = await FailoverPair.create();
    await streaming(pair, "a");
    const post = (path: string) =>
      fetch(`${pair!.node("b").ops}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN}` },
      });
    const refused = await post("/v1/promote");
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({
      error: "promote_refused",
      code: "PRIMARY_LEASED",
    });
    expect((await status(pair.node("a"))).role).toBe("primary");
    expect([(await status(pair.node("a"))).epoch, (await status(pair.node("b"))).epoch]).toEqual([
      1, 1,
    ]);
    const forced = await post("/v1/promote?force=true");
    expect(forced.status).toBe(200);
    expect(await forced.json()).toMatchObject({ role: "primary", epoch: 2 });
    await waitFor(
      "a stepped down",
      async () => (await status(pair!.node("a"))).role === "standby",
      {
        timeoutMs: 10_000,
      },
    );
  });
});
