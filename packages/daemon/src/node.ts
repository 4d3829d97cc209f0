// One vgpud node, assembled from its config: backend, metrics, guest gRPC server and ops HTTP
// server. Standalone for now (no peer). start() listens; stop() drains and closes.
import {
  type Config,
  createMetrics,
  ErrorCode,
  type Logger,
  type NodeMetrics,
} from "@vgpu-ha/common";
import { Backend, computeDigest } from "@vgpu-ha/gpu-model";
import { type GuestServer, GuestService, startGuestServer, TenantAuth } from "@vgpu-ha/primary";
import type { FastifyInstance } from "fastify";
import { buildOpsApp } from "./ops/ops-app.js";
import { VERSION } from "./version.js";

export interface NodeAddresses {
  readonly guest: string;
  readonly ops: string;
}

export class VgpuNode {
  readonly config: Config;
  readonly log: Logger;
  readonly backend: Backend;
  readonly metrics: NodeMetrics;
  readonly guests: GuestService;
  private readonly ops: FastifyInstance;
  private guestServer: GuestServer | undefined;
  private readonly startedMs = Date.now();
  private stopping = false;
  readonly epoch = 1;

  constructor(config: Config, log: Logger) {
    this.config = config;
    this.log = log.child({ role: "standalone", epoch: this.epoch });
    this.backend = new Backend({
      device: config.device,
      tenants: new Map(
        config.tenants.map((t) => [t.name, { vramBytes: t.vramQuotaBytes, bos: t.boQuota }]),
      ),
      session: {
        replyCacheFrames: config.limits.replyCacheFrames,
        replyCacheBytes: config.limits.replyCacheBytes,
      },
      maxDmaBytes: config.limits.maxDmaBytes,
      maxStoresPerBatch: config.limits.maxStoresPerBatch,
      // No standby yet: nothing would consume the dirty pages.
      trackMmio: false,
    });
    const backend = this.backend;
    this.metrics = createMetrics({
      role: () => "standalone",
      epoch: () => this.epoch,
      sessions: () => backend.sessions.size,
      contexts: () => backend.contexts.size,
      bos: () => backend.device.boCount,
      vramUsedBytes: () => backend.device.vram.usedBytes,
      vramTotalBytes: () => backend.device.vram.totalBytes,
    });
    this.guests = new GuestService({
      backend,
      auth: new TenantAuth(config.tenants),
      metrics: this.metrics,
      log: this.log,
      nodeId: config.nodeId,
      epoch: () => this.epoch,
      maxFramesInFlight: config.guest.maxFramesInFlight,
      serving: () => !this.stopping,
    });
    this.ops = buildOpsApp({
      registry: this.metrics.registry,
      status: () => this.status(),
      readiness: () =>
        this.stopping
          ? { ready: false, reason: "shutting down" }
          : this.guestServer
            ? { ready: true, reason: "standalone and serving" }
            : { ready: false, reason: "starting" },
    });
  }

  async start(): Promise<NodeAddresses> {
    const guestServer = await startGuestServer({
      listen: this.config.guest.listen,
      service: this.guests,
      maxMessageBytes: this.config.guest.maxMessageBytes,
    });
    this.guestServer = guestServer;
    const [opsHost, opsPort] = splitHostPort(this.config.ops.listen);
    const opsUrl = await this.ops.listen({ host: opsHost, port: opsPort });
    const [guestHost] = splitHostPort(this.config.guest.listen);
    const addresses = { guest: `${guestHost}:${guestServer.port}`, ops: opsUrl };
    this.log.info({ ...addresses, version: VERSION }, "node serving");
    return addresses;
  }

  /** Drains: refuses new frames, ends streams, closes both servers. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.log.info("node stopping");
    this.guests.endAll("node shutting down");
    await this.guestServer?.stop(2000);
    await this.ops.close();
    this.log.info("node stopped");
  }

  status(): Record<string, unknown> {
    const b = this.backend;
    return {
      nodeId: this.config.nodeId,
      role: "standalone",
      epoch: this.epoch,
      serving: !this.stopping && this.guestServer !== undefined,
      sessions: b.sessions.size,
      guestStreams: this.guests.openStreams,
      contexts: b.contexts.size,
      bos: b.device.boCount,
      vram: { usedBytes: b.device.vram.usedBytes, totalBytes: b.device.vram.totalBytes },
      version: VERSION,
      uptimeSeconds: (Date.now() - this.startedMs) / 1000,
    };
  }

  digest() {
    return computeDigest(this.backend);
  }
}

export function splitHostPort(address: string): [string, number] {
  const i = address.lastIndexOf(":");
  const host = address.slice(0, i).replace(/^\[(.*)\]$/, "$1");
  return [host, Number(address.slice(i + 1))];
}

export { ErrorCode };
