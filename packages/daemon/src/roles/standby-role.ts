// The standby role: serves vgpu.v1.Replication, applies what the primary streams, and answers
// guests NOT_PRIMARY with the primary's address.
import type { Clock, Config, Logger, NodeMetrics, ReplicationGauges } from "@vgpu-ha/common";
import { computeDigest } from "@vgpu-ha/gpu-model";
import { type GuestServer, startGuestServer } from "@vgpu-ha/primary";
import { Receiver, ReplicationServer, refuseGuests } from "@vgpu-ha/standby";
import { backendOptions } from "./backend-options.js";
import { NO_REPLICATION, type Role, type RoleAddresses } from "./role.js";

interface Deps {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: NodeMetrics;
  readonly clock: Clock;
  readonly epoch: () => number;
}

export class StandbyRole implements Role {
  readonly name = "standby" as const;
  private readonly deps: Deps;
  readonly receiver: Receiver;
  private readonly server: ReplicationServer;
  private guestServer: GuestServer | undefined;
  private appliedCounted = 0;
  private primarySeq = 0;

  constructor(deps: Deps) {
    this.deps = deps;
    const { config, logger } = deps;
    this.receiver = new Receiver(
      {
        clusterId: config.clusterId,
        nodeId: config.nodeId,
        backendOptions: backendOptions(config, false),
      },
      deps.epoch(),
    );
    this.server = new ReplicationServer({
      listen: config.replication.listen,
      receiver: this.receiver,
      logger,
      maxMessageBytes: config.guest.maxMessageBytes,
      onStep: (m) => {
        if (m.kind === "heartbeat") this.primarySeq = m.lastSeq;
        this.afterStep();
      },
    });
  }

  async start(): Promise<RoleAddresses> {
    const { config } = this.deps;
    const port = await this.server.start();
    this.guestServer = await startGuestServer({
      listen: config.guest.listen,
      handlers: refuseGuests(() => config.peer.guestAddress ?? ""),
      maxMessageBytes: config.guest.maxMessageBytes,
    });
    const host = (a: string) => a.slice(0, a.lastIndexOf(":"));
    return {
      guest: `${host(config.guest.listen)}:${this.guestServer.port}`,
      replication: `${host(config.replication.listen)}:${port}`,
    };
  }

  async stop(): Promise<void> {
    await this.server.stop();
    await this.guestServer?.stop(1000);
  }

  private afterStep(): void {
    const { logger, metrics } = this.deps;
    const r = this.receiver;
    metrics.appliedEntries.inc(r.appliedEntries - this.appliedCounted);
    this.appliedCounted = r.appliedEntries;
    for (const e of r.takeEvents()) {
      const fields = { seq: e.seq, detail: e.detail, state: r.state };
      switch (e.kind) {
        case "divergence":
          metrics.divergences.inc();
          logger.error(fields, "divergence: stopped applying, asking for a full resync");
          break;
        case "snapshotStarted":
          logger.warn(fields, "snapshot transfer started");
          break;
        case "snapshotDone":
          logger.warn(fields, "snapshot installed: replica");
          break;
        case "staleEpoch":
          metrics.staleEpochRefusals.inc();
          logger.warn(fields, "refused a message from an older epoch");
          break;
        case "gap":
          logger.warn(fields, "gap in the stream: asked for a resend");
          break;
      }
    }
  }

  /** Test-only: flips one byte of the first buffer, so the next touching call or verify diverges. */
  corrupt(): { context: number; bo: number; offset: number } | undefined {
    const backend = this.receiver.backend;
    if (!backend) return undefined;
    for (const ctx of [...backend.contexts.values()].sort((a, b) => a.handle - b.handle)) {
      for (const gbo of [...ctx.bos.values()].sort((a, b) => a.handle - b.handle)) {
        gbo.bo.bytes[0] = (gbo.bo.bytes[0]! ^ 0xff) & 0xff;
        this.deps.logger.error(
          { context: ctx.handle, bo: gbo.handle },
          "TEST FAULT: corrupted one byte",
        );
        return { context: ctx.handle, bo: gbo.handle, offset: 0 };
      }
    }
    return undefined;
  }

  digest() {
    const backend = this.receiver.backend;
    return backend ? { seq: this.receiver.appliedSeq, digest: computeDigest(backend) } : undefined;
  }

  counts() {
    const b = this.receiver.backend;
    return {
      sessions: b?.sessions.size ?? 0,
      contexts: b?.contexts.size ?? 0,
      bos: b?.device.boCount ?? 0,
      vramUsed: b?.device.vram.usedBytes ?? 0,
      vramTotal: this.deps.config.device.vramBytes,
    };
  }

  replicationGauges(): ReplicationGauges {
    const r = this.receiver;
    const lastSeq = Math.max(this.primarySeq, r.appliedSeq);
    return {
      ...NO_REPLICATION,
      lastSeq,
      appliedSeq: r.appliedSeq,
      lagEntries: lastSeq - r.appliedSeq,
      connected: this.server.connected,
      snapshotInProgress: r.state === "snapshot",
      eligible: r.eligible,
    };
  }

  readiness() {
    const r = this.receiver;
    if (r.eligible) return { ready: true, reason: "standby: replica in sync" };
    return { ready: false, reason: `standby not eligible: ${r.state}` };
  }

  status(): Record<string, unknown> {
    const r = this.receiver;
    const g = this.replicationGauges();
    const since = this.server.lastMessageMs;
    return {
      role: "standby",
      serving: false,
      seq: { last: g.lastSeq, applied: r.appliedSeq, acknowledged: 0 },
      replication: {
        state: r.state,
        eligible: r.eligible,
        connected: this.server.connected,
        peer: this.deps.config.peer.name,
        lag: { entries: g.lagEntries },
        lastMessageAgeMs: since === undefined ? null : Math.round(performance.now() - since),
        snapshot: r.snapshotProgress ?? null,
        divergences: r.divergences,
      },
    };
  }
}
