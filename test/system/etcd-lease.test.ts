// Proves lease.mode etcd with a real etcd and real vgpud processes: the configured primary
// takes the leader key at cold start (epoch 1) and names its standby once it is in sync; when
// the primary is SIGKILLed its key expires and the standby promotes only by taking it (epoch 2)
// with every acknowledged frame present exactly once; cutting only the link between the nodes
// promotes no one (the primary serves alone, its standby no longer named); and with etcd
// stopped the primary acknowledges nothing from its lease's TTL on (it fences itself first).
// In sync mode only: etcd decides who serves the same way in every replication mode; what a
// kill may lose in each mode is failover.test.ts's and failover-backlog.test.ts's subject.
import { afterEach, describe, expect, it } from "vitest";
import type { CountingGuest } from "../support/counting-guest.js";
import { type EtcdServer, startEtcd } from "../support/etcd.js";
import { requireBinary } from "../support/external.js";
import { ADMIN, FailoverPair, startGuests, stopAndCheckGuests } from "../support/failover-pair.js";
import { metrics, sleep, status, verify, waitFor } from "../support/ops-client.js";
import { TcpProxy } from "../support/tcp-proxy.js";

const etcdBinary = requireBinary("etcd", "etcd-server");
const TTL_MS = 2000;

let pair: FailoverPair | undefined;
let etcd: EtcdServer | undefined;
const proxies: { proxy: TcpProxy; target: string }[] = [];
afterEach(async () => {
  await pair?.cleanup();
  pair = undefined;
  for (const p of proxies.splice(0)) await p.proxy.close();
  etcd?.resume();
  await etcd?.stop();
  etcd = undefined;
});

interface Record_ {
  epoch: number;
  primary: string;
  replica: string;
}

/** The cluster record as etcd holds it (through its JSON gateway). */
async function record(server: EtcdServer): Promise<Record_ | undefined> {
  const key = Buffer.from("/vgpu-ha/failover-test/record").toString("base64");
  const res = await fetch(`${server.endpoint}/v3/kv/range`, {
    method: "POST",
    body: JSON.stringify({ key }),
  });
  const body = (await res.json()) as { kvs?: { value: string }[] };
  const v = body.kvs?.[0]?.value;
  return v === undefined ? undefined : JSON.parse(Buffer.from(v, "base64").toString());
}

async function etcdPair(
  options: { proxied?: boolean; watchdogMs?: number } = {},
): Promise<FailoverPair> {
  etcd = await startEtcd(etcdBinary);
  const lease = {
    mode: "etcd",
    etcd: { endpoints: [etcd.endpoint], ttlMs: TTL_MS },
    ...(options.watchdogMs !== undefined ? { watchdogMs: options.watchdogMs } : {}),
  };
  const extra = { lease, testing: { faultInjection: true } };
  const p = await FailoverPair.create(extra, async (configs) => {
    if (!options.proxied) return;
    // Each node reaches its peer's replication port only through a proxy the test controls.
    for (const [self, other] of [
      [configs[0], configs[1]],
      [configs[1], configs[0]],
    ] as const) {
      const target = (other.replication as { listen: string }).listen;
      const proxy = await TcpProxy.start(target);
      proxies.push({ proxy, target });
      (self.peer as Record<string, unknown>).replicationAddress = proxy.address;
    }
  });
  await waitFor(
    "a streaming, its standby named in etcd and granted",
    async () =>
      (await status(p.node("a"))).replication?.state === "streaming" &&
      (await record(etcd!))?.replica === "b" &&
      (await status(p.node("b"))).replication?.eligible === true,
    { timeoutMs: 20_000 },
  );
  return p;
}

async function stopAndCheck(gs: CountingGuest[]) {
  for (const increments of await stopAndCheckGuests(gs)) expect(increments).toBeGreaterThan(0);
}

describe.skipIf(!etcdBinary)("etcd lease", () => {
  it("cold start takes the key; SIGKILL of the primary → the standby promotes by taking it, exactly once", async () => {
    pair = await etcdPair();
    expect(await record(etcd!)).toEqual({ epoch: 1, primary: "a", replica: "b" });
    expect((await status(pair.node("a"))).epoch).toBe(1);
    const gs = await startGuests(pair, 3);
    await sleep(700);
    pair.node("a").process.kill("SIGKILL");
    await waitFor("b promoted", async () => (await status(pair!.node("b"))).role === "primary", {
      timeoutMs: 15_000,
    });
    expect((await status(pair.node("b"))).epoch).toBe(2);
    expect(await record(etcd!)).toMatchObject({ epoch: 2, primary: "b" });
    const before = gs.map((g) => g.increments);
    await waitFor(
      "every guest acknowledged by the new primary",
      async () => gs.every((g, i) => g.increments > before[i]!),
      { timeoutMs: 15_000 },
    );
    expect(gs.every((g) => g.session.epoch === 2)).toBe(true);
    const promotions = await metrics(pair.node("b"));
    expect(promotions.get("vgpu_promotions_total", { reason: "etcd_key_acquired" })).toBe(1);
    // the old primary comes back as b's standby, and b names it once it is in sync
    await pair.start("a");
    await waitFor(
      "a rejoined and named in etcd",
      async () =>
        (await status(pair!.node("a"))).role === "standby" &&
        (await record(etcd!))?.replica === "a",
      { timeoutMs: 20_000 },
    );
    await stopAndCheck(gs);
    expect((await verify(pair.node("b"), ADMIN)).equal).toBe(true);
  });

  it("a cut link between the nodes promotes no one: the primary serves alone", async () => {
    pair = await etcdPair({ proxied: true });
    const gs = await startGuests(pair, 2);
    await sleep(300);
    for (const p of proxies) {
      p.proxy.setTarget(undefined);
      p.proxy.breakAll();
    }
    await waitFor(
      "a serving alone, b no longer named",
      async () =>
        (await status(pair!.node("a"))).degraded === true && (await record(etcd!))?.replica === "",
      { timeoutMs: 10_000 },
    );
    const before = gs.map((g) => g.increments);
    // Well past the TTL and the peer lease: the standby must still not have promoted.
    const deadline = performance.now() + 3 * TTL_MS;
    while (performance.now() < deadline) {
      const b = await status(pair.node("b"));
      expect(b.role).toBe("standby");
      await sleep(200);
    }
    expect(gs.every((g, i) => g.increments > before[i]!)).toBe(true);
    expect((await status(pair.node("a"))).role).toBe("primary");
    expect(await record(etcd!)).toMatchObject({ epoch: 1, primary: "a", replica: "" });
    // Not even a forced promotion makes a second primary while the key is held.
    const forced = await fetch(`${pair.node("b").ops}/v1/promote?force=true`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(forced.status).toBe(409);
    const answer = (await forced.json()) as { code: string; message: string };
    expect(answer.code).toBe("LEADER_KEY_HELD");
    expect(answer.message).toMatch(/held by a/);
    expect((await status(pair.node("b"))).role).toBe("standby");
    // heal: b catches up and is named again
    for (const p of proxies) p.proxy.setTarget(p.target);
    await waitFor(
      "b named again",
      async () =>
        (await record(etcd!))?.replica === "b" &&
        (await status(pair!.node("a"))).degraded === false,
      { timeoutMs: 20_000 },
    );
    await stopAndCheck(gs);
    expect((await verify(pair.node("a"), ADMIN)).equal).toBe(true);
  });

  it("switchover hands the key over: the standby takes it, no snapshot, nothing lost", async () => {
    pair = await etcdPair();
    const gs = await startGuests(pair, 2);
    await sleep(400);
    const res = await fetch(`${pair.node("a").ops}/v1/switchover`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(res.status).toBe(200);
    await waitFor("b primary", async () => (await status(pair!.node("b"))).role === "primary", {
      timeoutMs: 10_000,
    });
    expect(await record(etcd!)).toMatchObject({ epoch: 2, primary: "b" });
    await waitFor(
      "a standby of b, named",
      async () =>
        (await status(pair!.node("a"))).role === "standby" &&
        (await record(etcd!))?.replica === "a",
      { timeoutMs: 10_000 },
    );
    // a kept its state: no snapshot was taken to make it b's replica
    expect((await metrics(pair.node("b"))).get("vgpu_snapshots_total", { event: "started" })).toBe(
      0,
    );
    const before = gs.map((g) => g.increments);
    await waitFor("guests on b", async () => gs.every((g, i) => g.increments > before[i]!), {
      timeoutMs: 10_000,
    });
    await stopAndCheck(gs);
    expect((await verify(pair.node("b"), ADMIN)).equal).toBe(true);
  });

  it("with etcd stopped, the primary stops acknowledging before its TTL runs out", async () => {
    pair = await etcdPair();
    const gs = await startGuests(pair, 2);
    await sleep(500);
    const pausedAt = performance.now();
    etcd!.pause();
    await waitFor(
      "a fenced",
      async () => ((await status(pair!.node("a"))).lease as { state: string }).state === "fenced",
      { timeoutMs: 10_000 },
    );
    await sleep(TTL_MS); // anything acknowledged now would be after the TTL
    const lastAck = Math.max(...gs.flatMap((g) => g.ackTimes));
    expect(lastAck - pausedAt).toBeLessThan(TTL_MS);
    expect((await status(pair.node("a"))).role).toBe("primary");
    etcd!.resume();
    // etcd expires the lapsed lease; the granted standby or the old primary takes the key
    await waitFor(
      "a primary serving again",
      async () => {
        const roles = [await status(pair!.node("a")), await status(pair!.node("b"))];
        return roles.some(
          (s) =>
            s.role === "primary" &&
            s.lease !== null &&
            (s.lease as { state: string }).state !== "fenced",
        );
      },
      { timeoutMs: 20_000 },
    );
    const before = gs.map((g) => g.increments);
    await waitFor(
      "guests acknowledged again",
      async () => gs.every((g, i) => g.increments > before[i]!),
      { timeoutMs: 20_000 },
    );
    await stopAndCheck(gs);
  });

  it.each([
    ["keeps the key", 5000, 1],
    ["without it (watchdogMs 0), the key expires and the standby takes it", 0, 2],
  ] as const)("the lease thread, through a 3 s main-loop stall (TTL 2 s): %s", async (_, watchdogMs, epoch) => {
    pair = await etcdPair({ watchdogMs });
    if (watchdogMs > 0) {
      await waitFor("the lease thread keeps the etcd lease alive", async () => {
        const t = (await status(pair!.node("a"))).leaseThread as { etcdKeepalivesAnswered: number };
        return t.etcdKeepalivesAnswered > 0;
      });
    }
    const res = await fetch(`${pair.node("a").ops}/v1/test/stall?ms=3000`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(res.status).toBe(200);
    await sleep(5000);
    await waitFor(
      "a primary again",
      async () => {
        const [a, b] = [await status(pair!.node("a")), await status(pair!.node("b"))];
        return [a, b].some((n) => n.role === "primary" && n.epoch === epoch);
      },
      { timeoutMs: 15_000 },
    ).catch(async (e: Error) => {
      const s = [await status(pair!.node("a")), await status(pair!.node("b"))];
      const seen = s.map((n) => [n.role, n.epoch, n.lease, n.leaseThread]);
      throw new Error(
        `${e.message}: ${JSON.stringify(seen)} ${JSON.stringify(await record(etcd!))}`,
      );
    });
    expect((await record(etcd!))?.epoch).toBe(epoch);
    if (epoch === 1) {
      const thread = (await status(pair.node("a"))).leaseThread as {
        etcdKeepalivesAnswered: number;
      };
      expect(thread.etcdKeepalivesAnswered).toBeGreaterThan(0);
      expect((await status(pair.node("a"))).role).toBe("primary");
    }
  });
});
