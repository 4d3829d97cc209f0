// Proves, on a host with a GPU (`npm run test:gpu`), that pairs whose primary runs its device on
// the GPU (device.backend webgpu) keep exact replicas — a model standby and a webgpu standby
// alike: equal digests after concurrent random guest sessions (every call kind, every kernel,
// MMIO stores, faults), and through a SIGKILL failover (the standby takes over, guests resume
// exactly once, the old primary rejoins by snapshot) and a switchover (no snapshot), in sync
// mode. VGPUHA_TEST_GPUS=2 puts the two nodes on two GPUs (packages/daemon/src/process/gpu-placement.ts); else
// both share one. Without an adapter the webgpu nodes exit 2 and these tests fail.
import { CALL_OPS } from "@vgpu-ha/common";
import { afterEach, describe, expect, it } from "vitest";
import {
  ADMIN,
  FailoverPair,
  GUEST,
  startGuests,
  stopAndCheckGuests,
} from "../support/failover-pair.js";
import { backendConfig, PAIRINGS, type Pairing, pairWraps } from "../support/gpu-backend.js";
import { openAndRun } from "../support/guest-workload.js";
import { digest, metrics, sleep, status, verify, waitFor } from "../support/ops-client.js";
import { GUESTS, ReplicationPair } from "../support/replication-pair.js";

const SESSIONS = 4;
const FRAMES = 300;

let repl: ReplicationPair | undefined;
let pair: FailoverPair | undefined;
afterEach(async () => {
  await repl?.stop();
  repl = undefined;
  await pair?.cleanup();
  pair = undefined;
});

/** A failover pair: a (configured primary) of `p.primary`'s backend, b of the standby's. */
async function failoverPair(p: Pairing): Promise<FailoverPair> {
  const wraps = pairWraps();
  return FailoverPair.create(
    {
      replication: { mode: "sync" },
      // The random workload's tenant and DMA limit, as ReplicationPair's (its expectations).
      limits: { maxDmaBytes: "1MiB" },
      tenants: [
        { name: GUEST.tenant, token: GUEST.token, vramQuotaBytes: "128MiB" },
        {
          name: GUESTS.workload.tenant,
          token: GUESTS.workload.token,
          vramQuotaBytes: "1GiB",
          boQuota: 100_000,
        },
      ],
    },
    async ([a, b]) => {
      Object.assign(a, merged(a, backendConfig(p.primary)));
      Object.assign(b, merged(b, backendConfig(p.standby)));
    },
    {
      ...(wraps.primary ? { a: wraps.primary } : {}),
      ...(wraps.standby ? { b: wraps.standby } : {}),
    },
  );
}

type Json = Record<string, unknown>;
function merged(base: Json, over: Json): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const o = out[k];
    out[k] =
      typeof o === "object" && o !== null && typeof v === "object" && v !== null
        ? merged(o as Json, v as Json)
        : v;
  }
  return out;
}

/** The nodes' backends as their status says (the configured ones, no fallback). */
async function expectBackends(nodes: { ops: string }[], backends: string[]) {
  const statuses = await Promise.all(nodes.map((n) => status(n)));
  expect(statuses.map((s) => (s.device as { backend: string }).backend)).toEqual(backends);
  for (const s of statuses)
    expect((s.device as { fallbackReason?: string }).fallbackReason).toBeUndefined();
}

/** Both nodes' digests at one seq, equal in every part. */
async function expectEqualDigests(a: { ops: string }, b: { ops: string }) {
  const [da, db] = await waitFor("both nodes at one seq", async () => {
    const both = await Promise.all([digest(a), digest(b)]);
    return both[0].seq === both[1].seq ? both : undefined;
  });
  expect({ gpu: db.gpu, sessions: db.sessions, state: db.state }).toEqual({
    gpu: da.gpu,
    sessions: da.sessions,
    state: da.state,
  });
}

describe.each(PAIRINGS)("$name", (p) => {
  it("equal replicas after concurrent random guest sessions", async () => {
    repl = await ReplicationPair.start({
      primary: backendConfig(p.primary),
      standby: backendConfig(p.standby),
      shared: { replication: { mode: "sync" } },
      wrap: pairWraps(),
    });
    await repl.waitInSync();
    await expectBackends([repl.primary, repl.liveStandby], [p.primary, p.standby]);
    const guest = { endpoint: repl.primary.guest, ...GUESTS.workload };
    const runs = await Promise.all(
      Array.from({ length: SESSIONS }, (_, i) => openAndRun(guest, 1700 + i, FRAMES)),
    );
    await Promise.all(runs.map((r) => r.session.close()));
    // Every result matched the model's replay of the workload in the guest.
    for (const { report } of runs) expect(report.mismatches).toEqual([]);
    const kinds = new Set(runs.flatMap(({ report }) => [...report.kinds.keys()]));
    for (const kind of [...CALL_OPS, "stores", "fault"]) expect(kinds).toContain(kind);
    expect(await repl.verify()).toMatchObject({ equal: true });
    await expectEqualDigests(repl.primary, repl.liveStandby);
    expect((await status(repl.liveStandby)).replication).toMatchObject({
      state: "replica",
      divergences: 0,
    });
  });

  it("failover: SIGKILL of the primary, guests resume exactly once, equal replicas after", async () => {
    pair = await failoverPair(p);
    await pair.streaming("a");
    await expectBackends([pair.node("a"), pair.node("b")], [p.primary, p.standby]);
    // A state with every kernel's results in it, then counting guests under load.
    const endpoints = pair.endpoints;
    const { report, session } = await openAndRun(
      { endpoint: endpoints[0]!, ...GUESTS.workload },
      1800,
      FRAMES,
    );
    await session.close();
    expect(report.mismatches).toEqual([]);
    const gs = await startGuests(pair, 3);
    await sleep(700);
    pair.node("a").process.kill("SIGKILL");
    await waitFor("b promoted", async () => (await status(pair!.node("b"))).role === "primary", {
      timeoutMs: 15_000,
    });
    const before = gs.map((g) => g.increments);
    await waitFor(
      "every guest acknowledged again after the failover",
      async () => gs.every((g, i) => g.increments > before[i]!),
      { timeoutMs: 20_000 },
    );
    await pair.start("a");
    await pair.replica("a", 60_000);
    for (const increments of await stopAndCheckGuests(gs)) expect(increments).toBeGreaterThan(0);
    expect((await verify(pair.node("b"), ADMIN)).equal).toBe(true);
    await expectEqualDigests(pair.node("a"), pair.node("b"));
  });

  it("switchover under load: no snapshot, nothing lost or repeated, equal replicas", async () => {
    pair = await failoverPair(p);
    await pair.streaming("a");
    const gs = await startGuests(pair, 3);
    await sleep(500);
    const res = await fetch(`${pair.node("a").ops}/v1/switchover`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(res.status).toBe(200);
    await waitFor("b primary", async () => (await status(pair!.node("b"))).role === "primary", {
      timeoutMs: 10_000,
    });
    const before = gs.map((g) => g.increments);
    await waitFor(
      "guests acknowledged by the new primary",
      async () => gs.every((g, i) => g.increments > before[i]!),
      { timeoutMs: 20_000 },
    );
    await pair.streaming("b");
    for (const increments of await stopAndCheckGuests(gs)) expect(increments).toBeGreaterThan(0);
    const mb = await metrics(pair.node("b"));
    expect(mb.get("vgpu_snapshots_total", { event: "started" })).toBe(0);
    expect(mb.get("vgpu_promotions_total", { reason: "switchover" })).toBe(1);
    expect((await verify(pair.node("b"), ADMIN)).equal).toBe(true);
    await expectEqualDigests(pair.node("a"), pair.node("b"));
  });
});
