// The primary (and standalone) role: serves guests through the sequencer; with a peer, streams
// the log to the standby and, in sync mode, releases each reply once the standby applied it.
// Standalone is the same without a peer: nothing to wait for, the log is dropped as it goes.
import {
  type Clock,
  type Config,
  type Logger,
  type NodeMetrics,
  type ReplicationGauges,
  ReplicationLog,
} from "@vgpu-ha/common";
import { Backend, computeDigest, SnapshotSource } from "@vgpu-ha/gpu-model";
import {
  type GuestServer,
  GuestService,
  ReplicationClient,
  Sender,
  type SenderEvent,
  Sequencer,
  startGuestServer,
  TenantAuth,
} from "@vgpu-ha/primary";
import { backendOptions } from "./backend-options.js";
import { NO_REPLICATION, type Role, type RoleAddresses, type VerifyResult } from "./role.js";

interface Deps {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: NodeMetrics;
  readonly clock: Clock;
  readonly epoch: () => number;
}

export class PrimaryRole implements Role {
  readonly name: "primary" | "standalone";
  private readonly deps: Deps;
  readonly backend: Backend;
  readonly log = new ReplicationLog();
  readonly sequencer: Sequencer;
  readonly guests: GuestService;
  readonly sender: Sender | undefined;
  private readonly client: ReplicationClient | undefined;
  private guestServer: GuestServer | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  /** Snapshot ids grow across restarts too (a standby ignores chunk 0 of an older id). */
  private nextSnapshotId = Date.now() * 1000;
  private nextCheckpoint = 1;
  private readonly checkpointWaiters = new Map<
    number,
    (e: SenderEvent & { kind: "checkpoint" }) => void
  >();
  private lastMmio = { storesSeen: 0, pageBatches: 0, pagesShipped: 0, bytesShipped: 0 };

  constructor(deps: Deps) {
    this.deps = deps;
    const { config, logger, metrics, clock } = deps;
    const replicating = config.role === "primary";
    this.name = replicating ? "primary" : "standalone";
    const perPage = config.mmio.replication === "per-page";
    this.backend = new Backend(backendOptions(config, replicating && perPage));
    this.sequencer = new Sequencer(
      this.backend,
      this.log,
      { mmio: config.mmio.replication, flushBytes: config.mmio.flushBytes },
      () => clock.monotonicMs(),
    );
    if (replicating) {
      const r = config.replication;
      this.sender = new Sender(
        {
          clusterId: config.clusterId,
          nodeId: config.nodeId,
          maxBatchEntries: r.maxBatchEntries,
          maxBatchBytes: r.maxBatchBytes,
          maxInflightEntries: r.maxInflightEntries,
          maxInflightBytes: r.maxInflightBytes,
          snapshotWindowChunks: r.snapshotWindowChunks,
          heartbeatMs: r.heartbeatMs,
          retransmitMs: r.retransmitMs,
          retainBytes: r.retainBytes,
        },
        this.log,
        () => this.startSnapshot(),
        deps.epoch(),
      );
      this.client = new ReplicationClient({
        address: config.peer.replicationAddress!,
        sender: this.sender,
        log: this.log,
        clock,
        logger,
        metrics,
        reconnectMs: r.reconnectMs,
        retainBytes: r.retainBytes,
        maxMessageBytes: config.guest.maxMessageBytes,
        onProgress: () => this.onReplicationProgress(),
        onEvent: (e) => this.onSenderEvent(e),
      });
    }
    const sender = this.sender;
    const syncMode = config.replication.mode === "sync";
    this.guests = new GuestService({
      sequencer: this.sequencer,
      auth: new TenantAuth(config.tenants),
      metrics,
      log: logger,
      nodeId: config.nodeId,
      epoch: deps.epoch,
      maxFramesInFlight: config.guest.maxFramesInFlight,
      maxMessageBytes: config.guest.maxMessageBytes,
      serving: () => !this.stopping,
      replicatedSeq: () => (syncMode && sender?.inSync ? sender.appliedSeq : undefined),
      afterApply: () => this.afterGuestMessage(),
      redirect: () => config.peer.guestAddress ?? "",
    });
  }

  async start(): Promise<RoleAddresses> {
    const { config } = this.deps;
    this.guestServer = await startGuestServer({
      listen: config.guest.listen,
      handlers: this.guests.handlers(),
      maxMessageBytes: config.guest.maxMessageBytes,
    });
    this.client?.start();
    const host = config.guest.listen.slice(0, config.guest.listen.lastIndexOf(":"));
    return { guest: `${host}:${this.guestServer.port}` };
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.flushTimer);
    this.guests.endAll("node shutting down");
    this.client?.stop();
    await this.guestServer?.stop(2000);
  }

  private startSnapshot(): SnapshotSource {
    this.sequencer.flushMmio();
    const source = new SnapshotSource(
      this.backend,
      this.nextSnapshotId++,
      this.log.lastSeq,
      this.deps.config.replication.snapshotChunkBytes,
    );
    this.deps.logger.warn(
      { seq: source.atSeq, snapshot: source.snapshotId, contexts: source.meta.contexts.length },
      "snapshot started",
    );
    return source;
  }

  /** After each guest message: cut MMIO soon, send, and drop what no one needs. */
  private afterGuestMessage(): void {
    if (this.sequencer.mmioPending && this.flushTimer === undefined) {
      this.flushTimer = setTimeout(() => {
        this.flushTimer = undefined;
        this.sequencer.flushMmio();
        this.afterGuestMessage();
      }, this.deps.config.mmio.flushDelayMs);
    }
    this.countMmio();
    if (this.client) {
      this.client.pump();
      this.applyBackPressure();
    } else {
      this.log.release(this.log.lastSeq, 0);
    }
    this.guests.release();
  }

  private onReplicationProgress(): void {
    this.guests.release();
    this.applyBackPressure();
  }

  /** Holds guests back while the standby lags beyond the configured bound. */
  private applyBackPressure(): void {
    const sender = this.sender!;
    const r = this.deps.config.replication;
    if (sender.state !== "streaming" && sender.state !== "snapshot") {
      this.guests.setPaused(false);
      return;
    }
    const lag = this.log.lagAfter(
      sender.state === "snapshot" ? (sender.snapshotProgress?.atSeq ?? 0) : sender.appliedSeq,
      this.deps.clock.monotonicMs(),
    );
    this.guests.setPaused(lag.entries > r.maxLagEntries || lag.bytes > r.maxLagBytes);
  }

  private countMmio(): void {
    const c = this.sequencer.mmioCounters;
    const m = this.deps.metrics;
    m.mmioPageBatches.inc(c.pageBatches - this.lastMmio.pageBatches);
    m.mmioPagesShipped.inc(c.pagesShipped - this.lastMmio.pagesShipped);
    m.mmioBytesShipped.inc(c.bytesShipped - this.lastMmio.bytesShipped);
    this.lastMmio = { ...c };
  }

  private onSenderEvent(e: SenderEvent): void {
    const { logger, metrics } = this.deps;
    switch (e.kind) {
      case "snapshotStarted":
        metrics.snapshots.inc({ event: "started" });
        break;
      case "snapshotResumed":
        metrics.snapshots.inc({ event: "resumed" });
        logger.warn({ snapshot: e.snapshotId, chunk: e.chunk }, "snapshot resumed");
        break;
      case "snapshotDone": {
        const last = this.sender!.lastSnapshot!;
        metrics.snapshots.inc({ event: "completed" });
        metrics.snapshotBytes.inc(last.bytes);
        metrics.snapshotDuration.observe(last.seconds);
        logger.warn({ seq: e.atSeq, snapshot: e.snapshotId, ...last }, "snapshot completed");
        break;
      }
      case "resumed":
        metrics.resumes.inc();
        logger.warn({ seq: e.fromSeq }, "standby resumed from the retained log");
        break;
      case "resync":
        logger.warn({ reason: e.reason, detail: e.detail }, "standby asked for a resync");
        if (e.reason === "diverged") metrics.divergences.inc();
        break;
      case "refused":
        logger.error({ code: e.code, message: e.message }, "standby refused us");
        break;
      case "higherEpoch":
        metrics.staleEpochRefusals.inc();
        logger.error({ theirs: e.epoch }, "standby has a higher epoch");
        break;
      case "checkpoint":
        this.checkpointWaiters.get(e.requestId)?.(e);
        break;
    }
  }

  async verify(): Promise<VerifyResult> {
    const sender = this.sender;
    if (!sender?.inSync) throw new Error("no standby in sync to compare with");
    const digest = computeDigest(this.backend).state;
    const requestId = this.nextCheckpoint++;
    const seq = this.sequencer.checkpoint(digest, requestId);
    this.afterGuestMessage();
    const answer = await new Promise<SenderEvent & { kind: "checkpoint" }>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.checkpointWaiters.delete(requestId);
        reject(new Error(`standby did not reach seq ${seq} within 30 s`));
      }, 30_000);
      this.checkpointWaiters.set(requestId, (e) => {
        clearTimeout(timer);
        this.checkpointWaiters.delete(requestId);
        resolve(e);
      });
    });
    return { equal: answer.equal, seq, primary: digest, standby: answer.digest };
  }

  digest() {
    return { seq: this.log.lastSeq, digest: computeDigest(this.backend) };
  }

  counts() {
    const b = this.backend;
    return {
      sessions: b.sessions.size,
      contexts: b.contexts.size,
      bos: b.device.boCount,
      vramUsed: b.device.vram.usedBytes,
      vramTotal: b.device.vram.totalBytes,
    };
  }

  replicationGauges(): ReplicationGauges {
    const sender = this.sender;
    if (!sender) {
      return {
        ...NO_REPLICATION,
        lastSeq: this.log.lastSeq,
        acknowledgedSeq: this.guests.ackedSeq,
      };
    }
    const lag = this.log.lagAfter(sender.appliedSeq, this.deps.clock.monotonicMs());
    return {
      lastSeq: this.log.lastSeq,
      appliedSeq: sender.appliedSeq,
      acknowledgedSeq: this.guests.ackedSeq,
      lagEntries: lag.entries,
      lagBytes: lag.bytes,
      lagSeconds: lag.seconds,
      connected: this.client?.connected ?? false,
      snapshotInProgress: sender.state === "snapshot",
      eligible: false,
    };
  }

  readiness() {
    if (this.stopping) return { ready: false, reason: "shutting down" };
    if (!this.guestServer) return { ready: false, reason: "starting" };
    return { ready: true, reason: `${this.name} and serving` };
  }

  status(): Record<string, unknown> {
    const { config } = this.deps;
    const r = this.replicationGauges();
    const c = this.sequencer.mmioCounters;
    return {
      role: this.name,
      serving: !this.stopping && this.guestServer !== undefined,
      seq: { last: r.lastSeq, applied: r.appliedSeq, acknowledged: r.acknowledgedSeq },
      replication: this.sender
        ? {
            mode: config.replication.mode,
            peer: config.peer.name,
            peerAddress: config.peer.replicationAddress,
            state: this.sender.state,
            connected: r.connected,
            lag: { entries: r.lagEntries, bytes: r.lagBytes, seconds: r.lagSeconds },
            heldReplies: this.guests.heldReplies,
            snapshot: this.sender.snapshotProgress ?? null,
            lastSnapshot: this.sender.lastSnapshot ?? null,
            log: {
              firstRetainedSeq: this.log.firstRetainedSeq,
              heldEntries: this.log.heldEntries,
              heldBytes: this.log.heldBytes,
            },
          }
        : null,
      mmio: { mode: config.mmio.replication, ...c },
      guestStreams: this.guests.openStreams,
    };
  }
}
