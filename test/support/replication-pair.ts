// Starts a primary and a standby vgpud over loopback TCP, with different device seeds, and
// always stops both (SIGCONT first, in case a test paused one). The standby starts first; the
// primary dials its replication address, directly or through a TcpProxy that a test can cut
// and that keeps one address for the primary across standby restarts.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SpawnedNode } from "@vgpu-ha/daemon";
import { DEVICE_THREAD } from "./modes.js";
import { type NodeStatus, status, type VerifyAnswer, verify, waitFor } from "./ops-client.js";
import { TcpProxy } from "./tcp-proxy.js";
import { spawnTracked } from "./temp-node.js";

export const OPS_TOKEN = "ops-token-for-integration-tests";

/** Guests of the random workloads (tenant t0, as the generator names it) and of bulk data. */
export const GUESTS = {
  workload: { tenant: "t0", token: "t0-token-integration" },
  bulk: { tenant: "bulk", token: "bulk-token-integration" },
} as const;

const TENANTS = [
  { name: "t0", token: GUESTS.workload.token, vramQuotaBytes: "1GiB", boQuota: 100_000 },
  { name: "bulk", token: GUESTS.bulk.token, vramQuotaBytes: "1GiB", boQuota: 1000 },
];

type Json = Record<string, unknown>;

/**
 * A lease far longer than any pause a test makes (SIGSTOP of the standby for a second or two):
 * the primary keeps holding replies instead of going on alone, and the resumed standby does not
 * promote itself. The drift margin covers 1 % over 20 s.
 */
export const LONG_LEASE = { durationMs: 20_000, heartbeatMs: 100, driftMarginMs: 1000 } as const;

export interface PairOptions {
  /** Config merged into both nodes (replication, mmio, device, limits …). */
  readonly shared?: Json;
  readonly primary?: Json;
  readonly standby?: Json;
  /** Put a TcpProxy between the nodes (needed to cut the link or restart the standby). */
  readonly proxy?: boolean;
  /** Start the standby now (default) or later with startStandby() (needs proxy). */
  readonly startStandby?: boolean;
}

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** `b` over `a`, objects merged recursively, anything else replaced. */
export function merge(a: Json, b: Json = {}): Json {
  const out: Json = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const old = out[k];
    out[k] = isObject(old) && isObject(v) ? merge(old, v) : v;
  }
  return out;
}

function baseConfig(dir: string, role: "primary" | "standby"): Json {
  return {
    clusterId: "it-replication",
    nodeId: role === "primary" ? "node-p" : "node-s",
    role,
    peer: { name: role === "primary" ? "node-s" : "node-p" },
    stateDir: join(dir, `${role}-state`),
    guest: { listen: "127.0.0.1:0" },
    ops: { listen: "127.0.0.1:0", token: OPS_TOKEN },
    replication: { listen: "127.0.0.1:0", reconnectMs: 50 },
    // Different seeds: equal digests then prove the handle translation, not a coincidence.
    device: {
      seed: role === "primary" ? 0x1234 : 0xbeef,
      vramBytes: "256MiB",
      maxBoBytes: "64MiB",
      ...DEVICE_THREAD,
    },
    // 1 MiB: the generator's "DMA too big" fault (1 MiB + 1) must be refused.
    limits: { maxDmaBytes: "1MiB" },
    tenants: TENANTS,
    testing: { faultInjection: role === "standby" },
    log: { level: "info" },
  };
}

const running = (n: SpawnedNode) => n.process.exitCode === null && n.process.signalCode === null;

export class ReplicationPair {
  readonly dir: string;
  readonly primary: SpawnedNode;
  standby: SpawnedNode | undefined;
  readonly proxy: TcpProxy | undefined;
  /**
   * Between the standby and the primary's replication port: the standby's
   * peer.replicationAddress, where it pulls snapshot pages (PullSnapshot), so a test can cut a
   * pull without touching the replication stream.
   */
  readonly pullProxy: TcpProxy;
  private readonly standbyConfig: Json;
  private standbyRuns = 0;

  private constructor(
    dir: string,
    primary: SpawnedNode,
    standby: SpawnedNode | undefined,
    proxy: TcpProxy | undefined,
    pullProxy: TcpProxy,
    standbyConfig: Json,
  ) {
    this.dir = dir;
    this.primary = primary;
    this.standby = standby;
    this.proxy = proxy;
    this.pullProxy = pullProxy;
    this.standbyConfig = standbyConfig;
  }

  static async start(options: PairOptions = {}): Promise<ReplicationPair> {
    const dir = mkdtempSync(join(tmpdir(), "vgpu-repl-"));
    // The primary's address is known once it runs: the standby gets the pull proxy's.
    const pullProxy = await TcpProxy.start();
    const standbyConfig = merge(
      merge(
        merge(baseConfig(dir, "standby"), { peer: { replicationAddress: pullProxy.address } }),
        options.shared,
      ),
      options.standby,
    );
    const startStandby = options.startStandby ?? true;
    if (!startStandby && !options.proxy) throw new Error("a late standby needs the proxy");
    let standby: SpawnedNode | undefined;
    let proxy: TcpProxy | undefined;
    let primary: SpawnedNode | undefined;
    try {
      if (startStandby)
        standby = await spawnTracked({ dir, name: "standby-1", config: standbyConfig });
      if (options.proxy) proxy = await TcpProxy.start(standby?.replication);
      const peerAddress = proxy?.address ?? standby!.replication!;
      const primaryConfig = merge(merge(baseConfig(dir, "primary"), options.shared), {
        ...options.primary,
        peer: { name: "node-s", replicationAddress: peerAddress, ...(options.primary?.peer ?? {}) },
      });
      primary = await spawnTracked({ dir, name: "primary", config: primaryConfig });
      pullProxy.setTarget(primary.replication);
    } catch (e) {
      await standby?.stop();
      await proxy?.close();
      await pullProxy.close();
      throw e;
    }
    const pair = new ReplicationPair(dir, primary, standby, proxy, pullProxy, standbyConfig);
    pair.standbyRuns = startStandby ? 1 : 0;
    return pair;
  }

  /** Starts the standby (again: a fresh, empty process with the same config). */
  async startStandby(): Promise<SpawnedNode> {
    if (this.standby !== undefined && running(this.standby)) {
      throw new Error("the standby is running");
    }
    if (this.proxy === undefined) throw new Error("restarting the standby needs the proxy");
    this.standbyRuns++;
    const standby = await spawnTracked({
      dir: this.dir,
      name: `standby-${this.standbyRuns}`,
      config: this.standbyConfig,
    });
    this.standby = standby;
    this.proxy.setTarget(standby.replication);
    return standby;
  }

  /** SIGKILLs the standby and waits until it is gone; the proxy refuses until a restart. */
  async killStandby(): Promise<void> {
    const standby = this.standby;
    if (standby === undefined) return;
    this.proxy?.setTarget(undefined);
    standby.process.kill("SIGKILL");
    await standby.exited;
  }

  get liveStandby(): SpawnedNode {
    if (this.standby === undefined) throw new Error("no standby");
    return this.standby;
  }

  /** Waits until the primary streams to a standby that is a complete replica. */
  async waitInSync(timeoutMs = 60_000): Promise<{ primary: NodeStatus; standby: NodeStatus }> {
    return waitFor(
      "primary streaming to an eligible replica",
      async () => {
        const [p, s] = await Promise.all([status(this.primary), status(this.liveStandby)]);
        // In sync: the standby holds the grant too (it comes with a heartbeat after the
        // standby's device applied what the primary released).
        return p.replication?.state === "streaming" &&
          s.replication?.state === "replica" &&
          s.replication.eligible === true
          ? { primary: p, standby: s }
          : undefined;
      },
      { timeoutMs },
    );
  }

  /** The roles and epochs now: [primary, standby] (a failover would show here). */
  async roles(): Promise<[string, string]> {
    const [p, s] = await Promise.all([status(this.primary), status(this.liveStandby)]);
    return [`${p.role}@${p.epoch}`, `${s.role}@${s.epoch}`];
  }

  /** The project's own check: the primary logs a checkpoint and the standby compares. */
  verify(): Promise<VerifyAnswer> {
    return verify(this.primary, OPS_TOKEN);
  }

  /** Stops both nodes (resuming a paused one first) and removes the directory. */
  async stop(): Promise<void> {
    const nodes = [this.primary, this.standby].filter((n) => n !== undefined);
    for (const n of nodes) if (running(n)) n.process.kill("SIGCONT");
    await Promise.all(nodes.map((n) => n.stop(3000)));
    await this.proxy?.close();
    await this.pullProxy.close();
    // VGPUHA_TEST_KEEP=1 keeps the configs and node logs for a post-mortem.
    if (!process.env.VGPUHA_TEST_KEEP) rmSync(this.dir, { recursive: true, force: true });
  }
}
