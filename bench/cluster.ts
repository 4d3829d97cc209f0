// The node set-ups the replication benchmark measures side by side: a standalone node, and a
// primary/standby pair (standby started first, then the primary dialling it directly or
// through a counting proxy, then wait until the primary streams).
import { ConfigSchema } from "@vgpu-ha/common";
import { type CountingProxy, startCountingProxy } from "./counting-proxy.js";
import { BENCH_OTHER_TENANT, BENCH_TENANT } from "./guest-workload.js";
import { tallyLeaseEvents } from "./lease-events.js";
import { type NodeProcess, type StartOptions, startNode } from "./node-process.js";
import { waitStreaming } from "./ops-client.js";

/** `sync-applied` only where the build's config accepts it (ack-modes; see acceptsMode). */
export type ReplicationMode = "sync" | "async" | "sync-applied";
export type MmioReplication = "per-page" | "per-store";

const ADMIN_TOKEN = "bench-admin-token-0001";
const CLUSTER_ID = "bench";

const COMMON = {
  clusterId: CLUSTER_ID,
  ops: { token: ADMIN_TOKEN },
  tenants: [
    { ...BENCH_TENANT, vramQuotaBytes: "3GiB", boQuota: 100_000 },
    // A second tenant for the heavy calls (replication-heavy.ts).
    { ...BENCH_OTHER_TENANT, vramQuotaBytes: "3GiB", boQuota: 1000 },
  ],
};
const DEVICE = { vramBytes: "4GiB", maxBoBytes: "1GiB" };

/** Peer lease terms (config `lease`); the product's defaults when not given. */
export interface LeaseTerms {
  readonly durationMs: number;
  readonly heartbeatMs: number;
  readonly driftMarginMs: number;
}

/**
 * BENCH_LEASE_MS=N gives every pair without lease terms of its own an N ms lease (heartbeat
 * 100 ms, the drift margin a 1 % drift needs plus 50 ms): to see what the lease costs.
 */
export function leaseOverride(): LeaseTerms | undefined {
  const ms = Number(process.env.BENCH_LEASE_MS ?? "");
  if (!Number.isInteger(ms) || ms <= 0) return undefined;
  return { durationMs: ms, heartbeatMs: 100, driftMarginMs: Math.floor((0.02 * ms) / 1.01) + 51 };
}

export interface Cluster {
  /** The node guests talk to (standalone or primary). */
  readonly primary: NodeProcess;
  readonly standby: NodeProcess | undefined;
  readonly proxy: CountingProxy | undefined;
  /** Every node, primary first. */
  readonly nodes: readonly NodeProcess[];
  /** Tallies the nodes' lease events (lease-events.ts) under the cluster's label, then stops. */
  stop(): Promise<void>;
}

/**
 * Which build's vgpud a node runs (before-build.ts; this build's when left out), and device
 * settings over the benchmark's own (gpu.ts: device.backend webgpu).
 */
type Build = Pick<StartOptions, "spawn"> & {
  readonly device?: Record<string, unknown>;
  /**
   * Every HTTP/2 receive window of the set-up's ports at HTTP/2's 64 KiB, as before #15 (the
   * modes phase's side-by-side of guest.streamWindowBytes and replication.streamWindowBytes).
   */
  readonly h2DefaultWindows?: boolean;
};

const H2_DEFAULT = { streamWindowBytes: 65_535, connectionWindowBytes: 65_535 } as const;

/** The guest and replication sections' window fields for `build` (none: the node's defaults). */
const windows = (build: Build, section: "guest" | "replication") =>
  build.h2DefaultWindows === true ? { [section]: H2_DEFAULT } : {};

export async function startStandalone(label: string, build: Build = {}): Promise<Cluster> {
  const node = await startNode(
    {
      ...COMMON,
      nodeId: "s",
      role: "standalone",
      ...windows(build, "guest"),
      device: { ...DEVICE, seed: 1, ...build.device },
    },
    { label, spawn: build.spawn },
  );
  return { primary: node, standby: undefined, proxy: undefined, nodes: [node], stop: node.stop };
}

export function startStandby(
  label: string,
  options: {
    listen?: string;
    lease?: LeaseTerms;
    profileFromStart?: boolean;
    /** The primary's replication address: the standby pulls snapshots from there. */
    primary?: string;
  } & Build = {},
): Promise<NodeProcess> {
  return startNode(
    {
      ...COMMON,
      nodeId: "b",
      role: "standby",
      peer: { name: "a", ...(options.primary ? { replicationAddress: options.primary } : {}) },
      replication: {
        ...(options.listen ? { listen: options.listen } : {}),
        ...windows(options, "replication").replication,
      },
      ...leaseConfig(options.lease),
      device: { ...DEVICE, seed: 2, ...options.device },
    },
    { label, profileFromStart: options.profileFromStart ?? false, spawn: options.spawn },
  );
}

export interface PrimaryOptions extends Build {
  readonly label: string;
  readonly mode: ReplicationMode;
  readonly mmio?: MmioReplication;
  /** Where the primary dials its standby. */
  readonly peer: string;
  readonly lease?: LeaseTerms;
}

/** The config a benchmark primary runs with (before startNode adds addresses and stateDir). */
export function primaryConfig(o: Omit<PrimaryOptions, "label">): Record<string, unknown> {
  return {
    ...COMMON,
    nodeId: "a",
    role: "primary",
    peer: { name: "b", replicationAddress: o.peer },
    ...windows(o, "guest"),
    replication: { mode: o.mode, ...windows(o, "replication").replication },
    mmio: { replication: o.mmio ?? "per-page" },
    ...leaseConfig(o.lease),
    device: { ...DEVICE, seed: 1, ...o.device },
  };
}

/** Whether this build's config takes `replication.mode: mode` (sync-applied arrives with ack-modes). */
export function acceptsMode(mode: ReplicationMode): boolean {
  return ConfigSchema.safeParse(primaryConfig({ mode, peer: "127.0.0.1:1" })).success;
}

export function startPrimary(o: PrimaryOptions): Promise<NodeProcess> {
  return startNode(primaryConfig(o), { label: o.label, spawn: o.spawn });
}

/**
 * A streaming pair; with `countWire`, the primary dials the standby through a counting proxy;
 * with `standbyListen`, the standby serves replication there (to restart it at that address).
 */
export async function startPair(
  o: {
    label: string;
    mode: ReplicationMode;
    mmio?: MmioReplication;
    countWire?: boolean;
    lease?: LeaseTerms;
    standbyListen?: string;
  } & Build,
): Promise<Cluster> {
  const started: { stop(): Promise<void> }[] = [];
  const nodes: NodeProcess[] = [];
  const stop = async () => {
    tallyLeaseEvents(o.label, nodes);
    for (const s of started.reverse()) await s.stop();
  };
  try {
    const standby = await startStandby(`${o.label}-standby`, {
      lease: o.lease,
      listen: o.standbyListen,
      spawn: o.spawn,
      device: o.device,
      ...(o.h2DefaultWindows ? { h2DefaultWindows: true } : {}),
    });
    started.push(standby);
    nodes.push(standby);
    const proxy = o.countWire ? await startCountingProxy(standby.replication!) : undefined;
    if (proxy) started.push(proxy);
    const primary = await startPrimary({
      label: `${o.label}-primary`,
      mode: o.mode,
      mmio: o.mmio,
      peer: proxy?.address ?? standby.replication!,
      lease: o.lease,
      spawn: o.spawn,
      device: o.device,
      ...(o.h2DefaultWindows ? { h2DefaultWindows: true } : {}),
    });
    started.push(primary);
    nodes.push(primary);
    await waitStreaming(primary);
    return { primary, standby, proxy, nodes: [primary, standby], stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

function leaseConfig(lease: LeaseTerms | undefined): { lease?: LeaseTerms } {
  const terms = lease ?? leaseOverride();
  return terms === undefined ? {} : { lease: terms };
}

export { freePort as reservePort } from "@vgpu-ha/daemon";
