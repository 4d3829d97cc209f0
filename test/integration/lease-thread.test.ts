// Proves the lease thread keeps a stalled-but-alive primary's lease: with real processes and
// the default 500 ms lease, a primary whose main event loop is blocked for 1.2 s (below
// lease.watchdogMs, 2 s) keeps its lease — no epoch change, every guest's frames applied
// exactly once — while the same stall without the thread (watchdogMs 0) costs a failover; a
// stall past watchdog + lease (4 s) is a hung primary: the standby takes over, and the old
// primary steps down when it wakes.
// In sync mode only: the lease and its thread do not depend on the replication mode.
import { afterEach, describe, expect, it } from "vitest";
import { ADMIN, FailoverPair, startGuests, stopAndCheckGuests } from "../support/failover-pair.js";
import { sleep, status, waitFor } from "../support/ops-client.js";

let pair: FailoverPair | undefined;
afterEach(async () => {
  await pair?.cleanup();
  pair = undefined;
});

async function streaming(p: FailoverPair) {
  await waitFor(
    "a streaming to its standby",
    async () => (await status(p.node("a"))).replication?.state === "streaming",
    { timeoutMs: 20_000 },
  );
}

/** Blocks the node's main event loop for `ms` (testing.faultInjection). */
async function stall(p: FailoverPair, ms: number): Promise<void> {
  const res = await fetch(`${p.node("a").ops}/v1/test/stall?ms=${ms}`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  expect(res.status).toBe(200);
}

const epochs = async (p: FailoverPair) =>
  [(await status(p.node("a"))).epoch, (await status(p.node("b"))).epoch] as const;

describe("the lease thread", () => {
  it("keeps the lease of a primary whose main loop stalls below the watchdog", async () => {
    pair = await FailoverPair.create({ testing: { faultInjection: true } });
    await streaming(pair);
    const gs = await startGuests(pair, 2);
    await sleep(500);
    const thread = (await status(pair.node("a"))).leaseThread as { up: boolean; acksTaken: number };
    expect(thread.up).toBe(true);
    expect(thread.acksTaken).toBeGreaterThan(0);
    for (let i = 0; i < 3; i++) {
      await stall(pair, 1200);
      await sleep(1800);
    }
    expect(await epochs(pair)).toEqual([1, 1]);
    expect((await status(pair.node("a"))).role).toBe("primary");
    for (const n of await stopAndCheckGuests(gs)) expect(n).toBeGreaterThan(0);
  });

  it("without it (watchdogMs 0), the same stall costs a failover", async () => {
    pair = await FailoverPair.create({
      testing: { faultInjection: true },
      lease: { watchdogMs: 0 },
    });
    await streaming(pair);
    await stall(pair, 1200);
    await waitFor("b promoted", async () => (await status(pair!.node("b"))).role === "primary", {
      timeoutMs: 10_000,
    });
    expect((await status(pair.node("a"))).leaseThread).toBeNull();
  });

  it("lets the standby take over from a primary hung past watchdog + lease", async () => {
    pair = await FailoverPair.create({ testing: { faultInjection: true } });
    await streaming(pair);
    const gs = await startGuests(pair, 2);
    await sleep(500);
    await stall(pair, 4000);
    await waitFor("b promoted", async () => (await status(pair!.node("b"))).role === "primary", {
      timeoutMs: 10_000,
    });
    await waitFor(
      "a stepped down",
      async () => (await status(pair!.node("a"))).role === "standby",
      {
        timeoutMs: 10_000,
      },
    );
    expect(await epochs(pair)).toEqual([2, 2]);
    for (const n of await stopAndCheckGuests(gs)) expect(n).toBeGreaterThan(0);
  });
});
