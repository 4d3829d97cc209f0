// Proves the peer-lease split brain of DESIGN §9 as documented: partition the link between the
// nodes (TCP proxies refuse and cut it) and both serve — the standby promotes (epoch 2), the old
// primary goes degraded and keeps acknowledging a guest pinned to it. When the link heals the
// lower epoch steps down, resyncs as standby, and reports what it discarded; the acknowledged
// frames it reports match what the pinned guest finds lost (up to the guest's frames in flight).
// In sync mode only: cut off, a primary serves alone (degraded) in every mode, and what it
// discards at the heal does not depend on the mode.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Session, SessionClosedError } from "@vgpu-ha/client";
import { pairConfigs, type SpawnedNode } from "@vgpu-ha/daemon";
import { afterEach, describe, expect, it } from "vitest";
import { metrics, sleep, status, verify, waitFor } from "../support/ops-client.js";
import { TcpProxy } from "../support/tcp-proxy.js";
import { spawnTracked } from "../support/temp-node.js";

const ADMIN = "partition-admin-token-01";
const GUEST = { tenant: "tenant-p", token: "tenant-p-token-01" };

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Json = Record<string, unknown>;
const listen = (c: Json, key: "guest" | "replication") => (c[key] as { listen: string }).listen;

describe("partition between the nodes (peer lease)", () => {
  it("both serve while cut; on heal the lower epoch steps down and reports what it discarded", async () => {
    const dir = mkdtempSync(join(tmpdir(), "vgpu-partition-"));
    const [a, b] = await pairConfigs({
      names: ["a", "b"],
      dir,
      clusterId: "partition-test",
      common: {
        ops: { token: ADMIN },
        device: { vramBytes: "128MiB" },
        tenants: [{ name: GUEST.tenant, token: GUEST.token, vramQuotaBytes: "64MiB" }],
      },
    });
    // Each node reaches its peer's replication port only through a proxy the test controls.
    const toB = await TcpProxy.start(listen(b, "replication"));
    const toA = await TcpProxy.start(listen(a, "replication"));
    (a.peer as Json).replicationAddress = toB.address;
    (b.peer as Json).replicationAddress = toA.address;
    const nodes: SpawnedNode[] = [];
    cleanups.push(async () => {
      for (const n of nodes) await n.stop();
      await toA.close();
      await toB.close();
      rmSync(dir, { recursive: true, force: true });
    });
    nodes.push(await spawnTracked({ dir, name: "b", config: b }));
    nodes.push(await spawnTracked({ dir, name: "a", config: a }));
    const [nb, na] = nodes as [SpawnedNode, SpawnedNode];
    await waitFor("a streaming", async () => (await status(na)).replication?.state === "streaming");

    // A guest pinned to a (its only endpoint), acknowledged frame by frame.
    const session = await Session.open({ endpoints: [listen(a, "guest")], ...GUEST });
    const ctx = await session.createContext();
    let acked = 0;
    let failure: Error | undefined;
    const load = (async () => {
      try {
        for (;;) {
          await session.fence(ctx);
          acked++;
          await sleep(2);
        }
      } catch (e) {
        failure = e as Error;
      }
    })();
    await waitFor("some acknowledgements", () => acked > 20);

    // Partition: refuse new connections both ways and cut the live one.
    toA.setTarget(undefined);
    toB.setTarget(undefined);
    toA.breakAll();
    toB.breakAll();
    await waitFor("b promoted", async () => (await status(nb)).role === "primary", {
      timeoutMs: 10_000,
    });
    await waitFor("a serving alone", async () => (await status(na)).degraded === true, {
      timeoutMs: 10_000,
    });
    const soloFrom = acked;
    await waitFor("a acknowledges alone", () => acked > soloFrom + 20, { timeoutMs: 10_000 });
    expect((await status(nb)).epoch).toBe(2);
    expect((await status(na)).role).toBe("primary"); // two primaries: the documented split brain

    // Heal.
    toA.setTarget(listen(a, "replication"));
    toB.setTarget(listen(b, "replication"));
    await waitFor("a stepped down", async () => (await status(na)).role === "standby", {
      timeoutMs: 10_000,
    });
    await waitFor("a resynced", async () => (await status(na)).replication?.state === "replica", {
      timeoutMs: 20_000,
    });
    await load;
    // The pinned guest followed the redirect to b, which lacks what a acknowledged alone.
    expect(failure).toBeInstanceOf(SessionClosedError);
    const lost = Number(/(\d+) lost/.exec(failure!.message)?.[1]);
    expect(lost).toBeGreaterThan(0);
    const m = await metrics(na);
    expect(m.get("vgpu_demotions_total", { reason: "higher_epoch" })).toBe(1);
    // The node counts replies it sent; one sent as it stepped down may never reach the guest,
    // which then re-sends that frame to b. So it reports at least what was lost, and at most
    // the guest's frames in flight (one here) more.
    const discarded = m.get("vgpu_split_brain_discarded_total", { what: "acknowledged_frames" });
    expect(discarded).toBeGreaterThanOrEqual(lost);
    expect(discarded).toBeLessThanOrEqual(lost + 1);
    expect((await status(nb)).role).toBe("primary");
    expect((await verify(nb, ADMIN)).equal).toBe(true);
  });
});
