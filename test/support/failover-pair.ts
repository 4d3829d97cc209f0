// A pair whose nodes know each other's addresses (ports chosen up front), so either can be
// primary, be killed, paused, restarted, and rejoin — what failover tests need.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pairConfigs, type SpawnedNode } from "@vgpu-ha/daemon";
import { CountingGuest } from "./counting-guest.js";
import { DEVICE_THREAD } from "./modes.js";
import { status, waitFor } from "./ops-client.js";
import { spawnTracked } from "./temp-node.js";

export const ADMIN = "failover-admin-token-0001";
export const GUEST = { tenant: "tenant-f", token: "tenant-f-token-01" };

export type NodeName = "a" | "b";

export class FailoverPair {
  readonly dir = mkdtempSync(join(tmpdir(), "vgpu-failover-"));
  readonly nodes = new Map<NodeName, SpawnedNode>();
  private readonly configs = new Map<NodeName, Record<string, unknown>>();
  /** A command a node's process runs under (spawnVgpud's `wrap`: GPU placement). */
  readonly wraps = new Map<NodeName, readonly string[]>();
  private restarts = 0;

  /** `prepare` may change both configs before the nodes start (e.g. to route via proxies). */
  static async create(
    extra: Record<string, unknown> = {},
    prepare?: (configs: [Record<string, unknown>, Record<string, unknown>]) => Promise<void>,
    wraps?: Partial<Record<NodeName, readonly string[]>>,
  ): Promise<FailoverPair> {
    const pair = new FailoverPair();
    for (const [name, wrap] of Object.entries(wraps ?? {})) {
      if (wrap) pair.wraps.set(name as NodeName, wrap);
    }
    const [a, b] = await pairConfigs({
      names: ["a", "b"],
      dir: pair.dir,
      clusterId: "failover-test",
      seeds: [11, 22],
      common: {
        ops: { token: ADMIN },
        device: { vramBytes: "256MiB", ...DEVICE_THREAD },
        tenants: [{ name: GUEST.tenant, token: GUEST.token, vramQuotaBytes: "128MiB" }],
        log: { level: "info" },
        ...extra,
      },
    });
    await prepare?.([a, b]);
    pair.configs.set("a", a);
    pair.configs.set("b", b);
    await pair.start("b");
    await pair.start("a");
    return pair;
  }

  /** Both guest endpoints, primary-configured first. */
  get endpoints(): string[] {
    return (["a", "b"] as const).map(
      (n) => (this.configs.get(n)!.guest as { listen: string }).listen,
    );
  }

  /** The config a node runs with (its addresses, peer, cluster id). */
  config(name: NodeName): Record<string, unknown> {
    return this.configs.get(name)!;
  }

  node(name: NodeName): SpawnedNode {
    return this.nodes.get(name)!;
  }

  async start(name: NodeName): Promise<SpawnedNode> {
    const wrap = this.wraps.get(name);
    const node = await spawnTracked({
      dir: this.dir,
      name: `${name}-${this.restarts++}`,
      config: this.configs.get(name)!,
      ...(wrap ? { wrap } : {}),
    });
    this.nodes.set(name, node);
    return node;
  }

  /** Waits until `primary` streams to its standby (the pair replicates). */
  async streaming(primary: NodeName = "a", timeoutMs = 20_000): Promise<void> {
    await waitFor(
      `${primary} streaming to its standby`,
      async () => (await status(this.node(primary))).replication?.state === "streaming",
      { timeoutMs },
    );
  }

  /** Waits until `standby` holds a replica (it has joined and resynced). */
  async replica(standby: NodeName, timeoutMs = 20_000): Promise<void> {
    await waitFor(
      `${standby} rejoined as a replica`,
      async () => (await status(this.node(standby))).replication?.state === "replica",
      { timeoutMs },
    );
  }

  async cleanup(): Promise<void> {
    for (const node of this.nodes.values()) {
      try {
        process.kill(node.pid, "SIGCONT");
      } catch {
        // already gone
      }
      await node.stop();
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** `n` counting guests on the pair's endpoints, started. */
export async function startGuests(p: FailoverPair, n: number): Promise<CountingGuest[]> {
  const gs = await Promise.all(
    Array.from({ length: n }, () => CountingGuest.open(p.endpoints, GUEST.tenant, GUEST.token)),
  );
  for (const g of gs) g.start();
  return gs;
}

/**
 * Stops the guests and checks each against the node's state (throws on a lost or repeated
 * frame); returns the increments each saw acknowledged.
 */
export async function stopAndCheckGuests(gs: CountingGuest[]): Promise<number[]> {
  await Promise.all(gs.map((g) => g.stop()));
  const seen: number[] = [];
  for (const g of gs) seen.push((await g.check()).increments);
  return seen;
}
