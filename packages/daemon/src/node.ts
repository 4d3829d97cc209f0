// One vgpud node, assembled from its config: the role (standalone, primary or standby), its
// metrics and the ops HTTP server. start() listens; stop() drains and closes.
import {
  type Clock,
  type Config,
  createMetrics,
  type Logger,
  type NodeMetrics,
  systemClock,
} from "@vgpu-ha/common";
import type { FastifyInstance } from "fastify";
import { buildOpsApp } from "./ops/ops-app.js";
import { PrimaryRole } from "./roles/primary-role.js";
import type { Role } from "./roles/role.js";
import { StandbyRole } from "./roles/standby-role.js";
import { VERSION } from "./version.js";

export interface NodeAddresses {
  readonly guest: string;
  readonly ops: string;
  readonly replication?: string;
}

export class VgpuNode {
  readonly config: Config;
  readonly log: Logger;
  readonly metrics: NodeMetrics;
  readonly role: Role;
  private readonly ops: FastifyInstance;
  private readonly startedMs = Date.now();
  private stopping = false;
  readonly epoch = 1;

  constructor(config: Config, log: Logger, clock: Clock = systemClock) {
    this.config = config;
    this.log = log.child({ role: config.role, epoch: this.epoch });
    const deps = { config, logger: this.log, clock, epoch: () => this.epoch };
    let role: Role | undefined;
    this.metrics = createMetrics({
      role: () => config.role,
      epoch: () => this.epoch,
      sessions: () => role!.counts().sessions,
      contexts: () => role!.counts().contexts,
      bos: () => role!.counts().bos,
      vramUsedBytes: () => role!.counts().vramUsed,
      vramTotalBytes: () => role!.counts().vramTotal,
      replication: () => role!.replicationGauges(),
    });
    role =
      config.role === "standby"
        ? new StandbyRole({ ...deps, metrics: this.metrics })
        : new PrimaryRole({ ...deps, metrics: this.metrics });
    this.role = role;
    this.ops = buildOpsApp({
      registry: this.metrics.registry,
      status: () => this.status(),
      readiness: () =>
        this.stopping ? { ready: false, reason: "shutting down" } : role.readiness(),
      digest: () => {
        const d = role.digest();
        return d ? { nodeId: config.nodeId, seq: d.seq, ...d.digest } : undefined;
      },
      adminToken: config.ops.token,
      admin: {
        ...(role.verify ? { verify: async () => ({ ...(await role.verify!()) }) } : {}),
        ...(role.corrupt && config.testing.faultInjection
          ? { corrupt: () => role.corrupt!() }
          : {}),
      },
    });
  }

  async start(): Promise<NodeAddresses> {
    const roleAddresses = await this.role.start();
    const [opsHost, opsPort] = splitHostPort(this.config.ops.listen);
    const ops = await this.ops.listen({ host: opsHost, port: opsPort });
    const addresses = { ...roleAddresses, ops };
    this.log.info({ ...addresses, version: VERSION }, "node serving");
    return addresses;
  }

  /** Drains: refuses new frames, ends streams, closes the servers. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.log.info("node stopping");
    await this.role.stop();
    await this.ops.close();
    this.log.info("node stopped");
  }

  status(): Record<string, unknown> {
    const c = this.role.counts();
    return {
      nodeId: this.config.nodeId,
      clusterId: this.config.clusterId,
      epoch: this.epoch,
      ...this.role.status(),
      sessions: c.sessions,
      contexts: c.contexts,
      bos: c.bos,
      vram: { usedBytes: c.vramUsed, totalBytes: c.vramTotal },
      version: VERSION,
      uptimeSeconds: (Date.now() - this.startedMs) / 1000,
    };
  }
}

export function splitHostPort(address: string): [string, number] {
  const i = address.lastIndexOf(":");
  const host = address.slice(0, i).replace(/^\[(.*)\]$/, "$1");
  return [host, Number(address.slice(i + 1))];
}
