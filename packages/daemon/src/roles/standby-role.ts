// The standby role: applies what the primary streams and watches the primary's lease. When
// nothing has come from the primary for a whole lease and this replica is eligible (complete,
// not diverged), it asks the node to promote it; an ineligible standby says why and waits.
// Guests are told NOT_PRIMARY with the primary's address.
import {
  type AcquireDecision,
  mayAcquire,
  NO_REPLICATION,
  type ReplicationGauges,
  type SessionView,
  watchStandbyLease,
} from "@vgpu-ha/common";
import { Backend, computeDigest } from "@vgpu-ha/gpu-model";
import { listSessions } from "@vgpu-ha/primary";
import { Receiver, type ReplicationCall, refuseGuests, StandbyLink } from "@vgpu-ha/standby";
import { nodeVersion } from "../version.js";
import { backendOptions } from "./backend-options.js";
import type { Takeover } from "./primary-role.js";
import type { GuestStream, Role, RoleDeps } from "./role.js";

export class StandbyRole implements Role {
  readonly name = "standby" as const;
  private readonly deps: RoleDeps;
  readonly receiver: Receiver;
  private readonly link: StandbyLink;
  private readonly refusal;
  private leaseTimer: NodeJS.Timeout | undefined;
  private appliedCounted = 0;
  private primarySeq = 0;
  private promoting = false;
  private ineligibleLogged = false;
  private lastWatchMs: number | undefined;
  private stopped = false;
  private digestWarm = false;
  /** etcd mode: a read or acquisition under way; when the last one ran; what it decided. */
  private etcdBusy = false;
  private etcdLastMs = Number.NEGATIVE_INFINITY;
  private etcdView: { leader: string | null; decision: string; error?: string } | undefined;
  /** etcd mode: the primary handed over; take the key as soon as it gives it up. */
  private handoverPending = false;
  /**
   * Guests that arrive during a switchover's promotion wait here for the new primary role
   * (instead of bouncing back to the old primary); refused if the promotion does not come.
   */
  private parked: GuestStream[] = [];
  private parking = false;
  private parkTimer: NodeJS.Timeout | undefined;

  constructor(deps: RoleDeps) {
    this.deps = deps;
    const { config, logger, clock } = deps;
    this.receiver = new Receiver(
      {
        clusterId: config.clusterId,
        nodeId: config.nodeId,
        version: nodeVersion(config),
        backendOptions: backendOptions(config, false),
      },
      deps.supervisor.epoch(),
    );
    this.link = new StandbyLink({
      receiver: this.receiver,
      logger,
      now: () => clock.monotonicMs(),
      // Only peer.name of this cluster may be our primary (under tls its certificate says so too).
      identity: {
        clusterId: config.clusterId,
        nodeId: config.nodeId,
        peerName: config.peer.name,
        version: nodeVersion(config),
      },
      onRefused: (why, remote) => deps.refusals.report(why, remote, "inbound"),
      onStep: (m) => {
        if (m.kind === "heartbeat") {
          this.primarySeq = m.lastSeq;
          deps.supervisor.adoptMaintenance(m.maintenancePaused === true);
        }
        // The primary's lease channel: its heartbeats count from now on, under its key.
        if (m.kind === "hello" && m.leaseKey) deps.leaseThread?.standby(m.leaseKey, m.epoch);
        this.afterStep();
      },
    });
    // Point guests at the primary only while it is known to be alive.
    // ...and heard from within the lease: a frozen primary keeps its connection open but is
    // silent, and a guest sent there would wait out its connect timeout.
    this.refusal = refuseGuests(() => {
      const last = this.lastHeardMs();
      const fresh = last !== undefined && clock.monotonicMs() - last < config.lease.durationMs;
      return this.link.connected && fresh ? (config.peer.guestAddress ?? "") : "";
    });
  }

  start(): void {
    const tickMs = Math.max(5, Math.floor(this.deps.config.lease.heartbeatMs / 2));
    this.leaseTimer = setInterval(() => this.watchLease(), tickMs);
  }

  async stop(reason: string): Promise<void> {
    this.stopped = true;
    clearInterval(this.leaseTimer);
    clearTimeout(this.parkTimer);
    // Parked guests go to the new primary role when promoted; otherwise they are refused.
    if (reason !== "promoted") for (const s of this.parked.splice(0)) this.refusal.session(s);
    this.link.close(reason);
  }

  serveGuest(stream: GuestStream): void {
    if (this.parking && !this.stopped) {
      stream.pause(); // its frames wait, buffered, for the primary role
      this.parked.push(stream);
      return;
    }
    this.refusal.session(stream);
  }

  /** The guest streams parked during a promotion, for the new primary role to serve. */
  takeParked(): GuestStream[] {
    clearTimeout(this.parkTimer);
    return this.parked.splice(0);
  }

  /** Parks arriving guests until the promotion completes (or refuses them after `ms`). */
  private parkGuests(ms: number): void {
    clearTimeout(this.parkTimer);
    this.parking = true;
    this.parkTimer = setTimeout(() => {
      this.parking = false;
      for (const s of this.parked.splice(0)) this.refusal.session(s);
    }, ms);
  }

  acceptReplication(call: ReplicationCall): void {
    this.link.accept(call);
  }

  /**
   * When the primary was last heard from: on its replication stream, or on the lease channel
   * (its lease thread's heartbeats, which a busy main loop on either side does not delay).
   */
  private lastHeardMs(): number | undefined {
    const stream = this.link.lastMessageMs;
    const channel = this.deps.leaseThread?.heardMs();
    if (channel === undefined) return stream;
    return stream === undefined ? channel : Math.max(stream, channel);
  }

  /** Promotion: nothing from the primary for a whole lease, and a replica able to take over. */
  private watchLease(): void {
    const t = this.deps.config.lease;
    const now = this.deps.clock.monotonicMs();
    // A gap since the last look means this process itself was stopped: see watchStandbyLease.
    const { watch, verdict } = watchStandbyLease(
      { lastWatchMs: this.lastWatchMs, lastMessageMs: this.lastHeardMs() },
      now,
      {
        leaseMs: t.durationMs,
        heartbeatMs: t.heartbeatMs,
        driftMarginMs: t.driftMarginMs,
        maxDriftRatio: t.maxDriftRatio,
      },
      this.receiver.eligible,
    );
    this.lastWatchMs = watch.lastWatchMs;
    this.link.lastMessageMs = watch.lastMessageMs;
    if (verdict === "woke") return;
    if (this.deps.arbiter) {
      this.watchEtcd(now);
      return;
    }
    if (verdict === "no-primary" || this.promoting) return;
    if (verdict === "live") {
      this.ineligibleLogged = false;
      return;
    }
    if (verdict === "ineligible") {
      if (!this.ineligibleLogged) {
        this.ineligibleLogged = true;
        this.deps.logger.error(
          { seq: this.receiver.appliedSeq, state: this.receiver.state },
          `primary's lease expired but this standby is not eligible (${ineligibleReason(this.receiver)}): not promoting`,
        );
      }
      return;
    }
    if (this.deps.supervisor.maintenancePaused()) {
      if (!this.pausedLogged) {
        this.pausedLogged = true;
        this.deps.logger.error(
          { seq: this.receiver.appliedSeq },
          "primary's lease expired; maintenance mode: not promoting (vgpuctl resume or promote)",
        );
      }
      return;
    }
    this.pausedLogged = false;
    this.promoting = true;
    this.parkGuests(2000);
    this.deps.supervisor.promote("lease_expired");
  }

  /** The "not promoting: paused" line was written for this lease expiry. */
  private pausedLogged = false;

  /**
   * etcd mode: the standby takes over only by taking the leader key, when the rule allows
   * (core/etcd-lease.ts mayAcquire): the key is free and this node holds the newest state (it
   * is the granted replica the record names), or nobody does and it is the configured primary.
   */
  private watchEtcd(now: number): void {
    if (this.promoting || this.etcdBusy || this.stopped) return;
    const pollMs = this.handoverPending ? 10 : this.deps.config.lease.etcd.pollMs;
    if (now - this.etcdLastMs < pollMs) return;
    this.etcdLastMs = now;
    this.etcdBusy = true;
    this.tryEtcd(this.deps.arbiter!)
      .catch((e: Error) => {
        this.etcdView = { leader: null, decision: "etcd unreachable", error: e.message };
      })
      .finally(() => {
        this.etcdBusy = false;
      });
  }

  private async tryEtcd(arbiter: NonNullable<RoleDeps["arbiter"]>): Promise<void> {
    const { config, supervisor, logger } = this.deps;
    const view = await arbiter.read();
    if (view.leader) {
      this.etcdView = { leader: view.leader.nodeId, decision: "the leader key is held" };
      return;
    }
    const decide = (peer: Parameters<typeof mayAcquire>[0]["peer"]): AcquireDecision =>
      mayAcquire({
        me: config.nodeId,
        configuredPrimary: config.role === "primary",
        leaderPresent: false,
        record: view.record,
        mine: this.receiver.eligible
          ? "granted-replica"
          : this.holdsReplica
            ? "replica"
            : "nothing",
        peer,
        localEpoch: supervisor.epoch(),
      });
    let decision = decide(undefined);
    if (!decision.acquire) {
      // Whether the peer holds the state decides between waiting and starting afresh.
      const p = await supervisor.probePeer();
      const holds = !p
        ? undefined
        : p.role === "primary"
          ? ("primary-state" as const)
          : p.replica
            ? ("granted-replica" as const)
            : ("nothing" as const);
      decision = decide(p && holds ? { nodeId: p.nodeId, holds } : undefined);
    }
    if (this.etcdView?.decision !== decision.reason) {
      logger.warn({ seq: this.receiver.appliedSeq, decision }, "etcd: the leader key is free");
    }
    this.etcdView = { leader: null, decision: decision.reason };
    if (!decision.acquire || this.stopped || this.promoting) return;
    // Maintenance mode: a handed-over key is still taken (a switchover); nothing else is.
    if (supervisor.maintenancePaused() && !this.handoverPending) {
      this.etcdView = { leader: null, decision: "maintenance mode: not taking the key" };
      return;
    }
    if (!(await arbiter.acquire(view, decision.epoch, config.guest.listen))) return;
    this.promoting = true;
    this.parkGuests(2000);
    supervisor.promote(
      this.handoverPending ? "switchover" : "etcd_key_acquired",
      !this.receiver.eligible,
      decision.epoch,
    );
  }

  /**
   * The replica, handed to the primary role at promotion; undefined when not eligible. Forced
   * (an operator's choice), whatever state there is, or an empty one.
   */
  takeover(force = false): Takeover | undefined {
    const backend = this.receiver.backend;
    if (backend && (this.receiver.eligible || force)) {
      return { backend, lastSeq: this.receiver.appliedSeq };
    }
    if (!force) return undefined;
    return {
      backend: new Backend(backendOptions(this.deps.config, false)),
      lastSeq: this.receiver.appliedSeq,
    };
  }

  /** A primary has spoken to this standby within the lease. */
  primaryInSight(): boolean {
    const last = this.lastHeardMs();
    return (
      last !== undefined && this.deps.clock.monotonicMs() - last < this.deps.config.lease.durationMs
    );
  }

  /**
   * This standby holds a replica (granted or not) with something in it — during a snapshot,
   * the one being replaced, intact until the snapshot completes.
   */
  get holdsReplica(): boolean {
    const r = this.receiver;
    const whole = r.state === "replica" || r.state === "snapshot";
    return whole && r.backend !== undefined && r.appliedSeq > 0;
  }

  /** Why this standby may not take over, or undefined when it may. */
  ineligibleReason(): string | undefined {
    return ineligibleReason(this.receiver);
  }

  probe() {
    return {
      role: "standby" as const,
      replica: this.receiver.eligible,
      appliedSeq: this.receiver.appliedSeq,
    };
  }

  private afterStep(): void {
    const { logger, metrics, supervisor } = this.deps;
    const r = this.receiver;
    if (!this.digestWarm && r.eligible) {
      // A handover waits for this replica's digest: run it once now, while nothing waits, so
      // the handover's is not the process's first (several times slower, code not compiled).
      this.digestWarm = true;
      setImmediate(() => {
        if (!this.stopped && r.backend) computeDigest(r.backend);
      });
    }
    if (r.epoch > supervisor.epoch()) supervisor.adoptEpoch(r.epoch);
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
          logger.warn(fields, "resync by snapshot started");
          break;
        case "snapshotDone":
          logger.warn(fields, "resync by snapshot finished: replica");
          break;
        case "staleEpoch":
          metrics.staleEpochRefusals.inc();
          logger.warn(fields, "refused a message from an older epoch");
          break;
        case "gap":
          logger.warn(fields, "gap in the stream: asked for a resend");
          break;
        case "handover":
          logger.warn(fields, "switchover: the primary handed over");
          this.parkGuests(2000);
          if (this.deps.arbiter) {
            this.handoverPending = true; // promote once the key is ours
            break;
          }
          this.promoting = true;
          supervisor.promote("switchover");
          break;
        case "handoverRefused":
          logger.error(fields, "switchover refused: not an exact replica");
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
      connected: this.link.connected,
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
    const since = this.lastHeardMs();
    return {
      role: "standby",
      serving: false,
      seq: { last: g.lastSeq, applied: r.appliedSeq, acknowledged: 0 },
      replication: {
        state: r.state,
        eligible: r.eligible,
        granted: r.granted,
        connected: this.link.connected,
        peer: this.deps.config.peer.name,
        peerVersion: this.link.peerVersion ?? null,
        lag: { entries: g.lagEntries },
        lastMessageAgeMs:
          since === undefined ? null : Math.round(this.deps.clock.monotonicMs() - since),
        snapshot: r.snapshotProgress ?? null,
        divergences: r.divergences,
      },
      ...(this.deps.arbiter ? { etcd: this.etcdView ?? null } : {}),
    };
  }
}

function ineligibleReason(r: Receiver): string | undefined {
  if (r.eligible) return undefined;
  if (r.state !== "replica") return `standby is ${r.state}`;
  return "replica without the primary's sync grant (not known to hold every acknowledged frame)";
}
