// The standby role in the daemon: the shipped StandbyDriver (packages/standby) over the
// daemon's ports — Node timers, the etcd client, gRPC guest streams, pino and prom-client —
// plus the views the ops API asks for (status, gauges, digest, sessions). The driver applies
// what the primary streams and watches its lease; when nothing has come from the primary for
// a whole lease and this replica is eligible (complete, not diverged), it asks the node to
// promote it; an ineligible standby says why and waits. Guests are told NOT_PRIMARY with the
// primary's address.
import {
  NO_REPLICATION,
  nodeTimers,
  type PrimaryMessage,
  type ReplicationGauges,
  type SessionView,
} from "@vgpu-ha/common";
import { digestOf, digestWhenDone } from "@vgpu-ha/gpu-model";
import { listSessions } from "@vgpu-ha/primary";
import {
  type Receiver,
  type ReceiverEvent,
  type ReplicationCall,
  refuseGuests,
  StandbyDriver,
  type StandbyNote,
} from "@vgpu-ha/standby";
import type { EtcdView } from "../lease/etcd-arbiter.js";
import { etcdPort } from "../lease/etcd-port.js";
import { nodeVersion } from "../version.js";
import { backendOptions } from "./backend-options.js";
import type { Takeover } from "./primary-role.js";
import type { GuestStream, Role, RoleDeps } from "./role.js";
import { grpcPullPort, pullWindowBytes } from "./snapshot-pull-grpc.js";
import { pagesPullPort } from "./snapshot-pull-port.js";
import { pagesClient } from "./snapshot-pull-socket.js";

export class StandbyRole implements Role {
  readonly name = "standby" as const;
  private readonly deps: RoleDeps;
  readonly driver: StandbyDriver<GuestStream, EtcdView>;
  readonly receiver: Receiver;
  private appliedCounted = 0;
  private primarySeq = 0;
  private stopped = false;
  private digestWarm = false;
  /** The replica a new primary took (its device lives on there). */
  private takenOver: Takeover | undefined;

  constructor(deps: RoleDeps) {
    this.deps = deps;
    const { config, logger, clock } = deps;
    const address = config.peer.replicationAddress;
    this.driver = new StandbyDriver<GuestStream, EtcdView>({
      receiver: {
        clusterId: config.clusterId,
        nodeId: config.nodeId,
        version: nodeVersion(config, deps.device),
        backendOptions: backendOptions(config, false, deps.device),
      },
      peerName: config.peer.name,
      peerGuestAddress: config.peer.guestAddress ?? "",
      configuredPrimary: config.role === "primary",
      lease: {
        leaseMs: config.lease.durationMs,
        heartbeatMs: config.lease.heartbeatMs,
        driftMarginMs: config.lease.driftMarginMs,
        maxDriftRatio: config.lease.maxDriftRatio,
      },
      etcd: deps.arbiter
        ? {
            port: etcdPort(deps.arbiter, config.guest.listen),
            pollMs: config.lease.etcd.pollMs,
          }
        : undefined,
      now: () => clock.monotonicMs(),
      timers: nodeTimers,
      supervisor: deps.supervisor,
      guests: {
        pause: (stream) => stream.pause(), // its frames wait, buffered, for the primary role
        refuse: (stream, redirect) => refuseGuests(() => redirect).session(stream),
      },
      logger,
      observer: {
        note: (n) => this.noted(n),
        stepped: (m) => this.stepped(m),
        receiverEvent: (e) => this.receiverEvent(e),
      },
      channelHeardMs: () => deps.leaseThread?.heardMs(),
      onRefused: (why, remote) => {
        deps.refusals.report(why, remote, "inbound");
        if (why.reason === "incompatible_contract") deps.contractRefused?.(why.message);
      },
      // Knowing the primary's replication address, it pulls snapshot pages from there.
      ...(address !== undefined
        ? {
            pullPort: pagesPullPort(
              pagesClient({
                address,
                ...(deps.peerTls
                  ? { tls: { files: deps.peerTls, peerName: config.peer.name } }
                  : {}),
                maxMessageBytes: config.guest.maxMessageBytes,
              }),
              grpcPullPort({
                address,
                ...(deps.peerChannel ? { channel: deps.peerChannel } : {}),
                maxMessageBytes: config.guest.maxMessageBytes,
                windowBytes: pullWindowBytes(
                  config.replication.snapshotChunkBytes,
                  config.replication.snapshotWindowChunks,
                ),
              }),
              () => clock.monotonicMs(),
            ),
          }
        : {}),
    });
    this.receiver = this.driver.receiver;
  }

  start(): void {
    // A replica kept from a handover is watched from the start; a snapshot's, once it lands.
    if (this.receiver.backend) this.deps.watchDevice?.(this.receiver.backend.progress);
    this.driver.start();
  }

  async stop(reason: string): Promise<void> {
    this.stopped = true;
    this.driver.stop(reason);
    // A replica a new primary took keeps its device; any other ends with this role.
    if (this.takenOver === undefined) this.receiver.backend?.close();
  }

  serveGuest(stream: GuestStream): void {
    this.driver.serveGuest(stream);
  }

  /** The guest streams parked during a promotion, for the new primary role to serve. */
  takeParked(): GuestStream[] {
    return this.driver.takeParked();
  }

  acceptReplication(call: ReplicationCall): void {
    this.driver.link.accept(call);
  }

  /**
   * The replica, handed to the primary role at promotion; undefined when not eligible. Forced
   * (an operator's choice), whatever state there is, or an empty one.
   */
  takeover(force = false): Takeover | undefined {
    this.takenOver = this.driver.takeover(force);
    return this.takenOver;
  }

  /** A primary has spoken to this standby within the lease. */
  primaryInSight(): boolean {
    return this.driver.primaryInSight();
  }

  get holdsReplica(): boolean {
    return this.driver.holdsReplica;
  }

  get takingOver(): boolean {
    return this.driver.takingOver;
  }

  get backlog(): number {
    return this.driver.backlog;
  }

  /** Why this standby may not take over, or undefined when it may. */
  ineligibleReason(): string | undefined {
    return ineligibleReason(this.receiver);
  }

  /** The highest epoch the receiver has seen. */
  seenEpoch(): number {
    return this.driver.seenEpoch();
  }

  probe() {
    return this.driver.probe();
  }

  private noted(n: StandbyNote): void {
    const { logger } = this.deps;
    const r = this.receiver;
    switch (n.kind) {
      case "ineligible":
        logger.error(
          { seq: r.appliedSeq, state: r.state },
          `primary's lease expired but this standby is not eligible (${ineligibleReason(r)}): not promoting`,
        );
        return;
      case "paused":
        logger.error(
          { seq: r.appliedSeq },
          "primary's lease expired; maintenance mode: not promoting (vgpuctl resume or promote)",
        );
        return;
      case "etcdDecision":
        logger.warn({ seq: r.appliedSeq, decision: n.decision }, "etcd: the leader key is free");
        return;
      case "awaitingBacklog":
        logger.warn(
          { seq: r.appliedSeq, receivedSeq: r.receivedSeq, backlogEntries: n.entries },
          "taking over once the device has applied the received backlog",
        );
        return;
      case "backlogApplied":
        this.deps.metrics.promotionBacklogWait.observe(n.waitedMs / 1000);
        logger.warn(
          { seq: r.appliedSeq, backlogWaitMs: n.waitedMs },
          "received backlog applied: taking over",
        );
        return;
      case "takeoverCalledOff":
        logger.warn(
          { seq: r.appliedSeq },
          "the primary spoke while the takeover waited for the backlog: no takeover",
        );
        return;
      case "deviceFailed":
        logger.error(
          { seq: r.appliedSeq, reason: n.reason, backlogEntries: n.backlog },
          n.takeoverDropped
            ? "device failed while the takeover waited for the backlog: no takeover; stepping down"
            : "device failed: this replica can never take over; stepping down",
        );
        return;
      default:
        return;
    }
  }

  private stepped(m: PrimaryMessage): void {
    const { metrics, supervisor, leaseThread } = this.deps;
    if (m.kind === "heartbeat") {
      this.primarySeq = m.lastSeq;
      supervisor.adoptMaintenance(m.maintenancePaused === true);
    }
    // The primary's lease channel: its heartbeats count from now on, under its key.
    if (m.kind === "hello" && m.leaseKey) leaseThread?.standby(m.leaseKey, m.epoch);
    const r = this.receiver;
    if (!this.digestWarm && r.eligible) {
      // A handover waits for this replica's digest: run it once now, while nothing waits, so
      // the handover's is not the process's first (several times slower, code not compiled).
      this.digestWarm = true;
      setImmediate(() => {
        if (!this.stopped && r.backend) digestWhenDone(r.backend, () => {});
      });
    }
    if (r.backend) this.deps.watchDevice?.(r.backend.progress); // a snapshot makes a new one
    metrics.appliedEntries.inc(r.appliedEntries - this.appliedCounted);
    this.appliedCounted = r.appliedEntries;
  }

  private receiverEvent(e: ReceiverEvent): void {
    const { logger, metrics } = this.deps;
    const fields = { seq: e.seq, detail: e.detail, state: this.receiver.state };
    switch (e.kind) {
      case "divergence":
        metrics.divergences.inc();
        logger.error(fields, "divergence: stopped applying, asking for a full resync");
        return;
      case "snapshotStarted":
        logger.warn(fields, "resync by snapshot started");
        return;
      case "snapshotDone":
        logger.warn(fields, "resync by snapshot finished: replica");
        return;
      case "staleEpoch":
        metrics.staleEpochRefusals.inc();
        logger.warn(fields, "refused a message from an older epoch");
        return;
      case "gap":
        logger.warn(fields, "gap in the stream: asked for a resend");
        return;
      case "handover":
        logger.warn(fields, "switchover: the primary handed over");
        return;
      case "handoverRefused":
        logger.error(fields, "switchover refused: not an exact replica");
        return;
      case "deviceFault":
        metrics.deviceFailures.inc({ whose: "peer" });
        logger.error(
          fields,
          "the primary's device failed: it steps down; its frame in flight is never run again here",
        );
        return;
      case "faultedNotRun":
        logger.error(fields, "takeover: a frame the failed device was running is not run here");
        return;
      case "foreignReplica":
        logger.error(fields, "the replica is not the primary's history: dropped for a snapshot");
        return;
    }
  }

  /** Test-only: flips one byte of the first buffer, so the next touching call or verify diverges. */
  corrupt(): { context: number; bo: number; offset: number } | undefined {
    const backend = this.receiver.backend;
    if (!backend) return undefined;
    for (const ctx of [...backend.contexts.values()].sort((a, b) => a.handle - b.handle)) {
      for (const gbo of [...ctx.bos.values()].sort((a, b) => a.handle - b.handle)) {
        backend.corruptByte(ctx.handle, gbo.handle);
        this.deps.logger.error(
          { context: ctx.handle, bo: gbo.handle },
          "TEST FAULT: corrupted one byte",
        );
        return { context: ctx.handle, bo: gbo.handle, offset: 0 };
      }
    }
    return undefined;
  }

  async digest() {
    const backend = this.receiver.backend;
    if (!backend) return undefined;
    const seq = this.receiver.appliedSeq;
    return { seq, digest: await digestOf(backend) };
  }

  /** The replica's sessions (none attached here: a standby serves no streams). */
  sessions(tenant?: string): SessionView[] {
    const backend = this.receiver.backend;
    return backend ? listSessions(backend, undefined, this.deps.clock, tenant) : [];
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
      connected: this.driver.link.connected,
      snapshotInProgress: r.state === "snapshot",
      eligible: r.eligible,
    };
  }

  readiness() {
    const r = this.receiver;
    if (r.eligible) return { ready: true, reason: "standby: replica in sync" };
    return { ready: false, reason: `standby not eligible: ${ineligibleReason(r)}` };
  }

  status(): Record<string, unknown> {
    const r = this.receiver;
    const g = this.replicationGauges();
    const since = this.driver.lastHeardMs();
    return {
      role: "standby",
      serving: false,
      // The history of the replica held (common core/lineage.ts): during a resync the one kept
      // until the snapshot lands; null with none (fresh, or a replica of another history dropped).
      lineage: r.backend?.lineage || null,
      seq: { last: g.lastSeq, applied: r.appliedSeq, received: r.receivedSeq, acknowledged: 0 },
      replication: {
        state: r.state,
        eligible: r.eligible,
        granted: r.granted,
        connected: this.driver.link.connected,
        peer: this.deps.config.peer.name,
        peerVersion: this.driver.link.peerVersion ?? null,
        lag: { entries: g.lagEntries },
        lastMessageAgeMs:
          since === undefined ? null : Math.round(this.deps.clock.monotonicMs() - since),
        snapshot: r.snapshotProgress ?? null,
        // Snapshot pulls opened since start (null: pages come on the stream).
        snapshotPulls: this.driver.puller?.opened ?? null,
        // Page bytes those pulls brought: read straight into the replica, or copied there.
        snapshotPulledBytes: this.driver.puller?.pulledBytes ?? null,
        divergences: r.divergences,
      },
      ...(this.deps.arbiter ? { etcd: this.driver.machine.etcdStatus ?? null } : {}),
    };
  }
}

function ineligibleReason(r: Receiver): string | undefined {
  if (r.eligible) return undefined;
  if (r.state !== "replica") return `standby is ${r.state}`;
  return "replica without the primary's sync grant (not known to hold every acknowledged frame)";
}
