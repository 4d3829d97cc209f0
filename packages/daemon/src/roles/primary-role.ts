// The primary (and standalone) role: serves guests through the sequencer; with a peer, streams
// the log to the standby. Replies are released only under the lease: in sync mode once the
// standby applied their entry; a primary whose lease lapsed holds every reply, and after a
// further lease without reaching its peer serves alone (degraded). Meeting a primary of a
// higher epoch, it steps down. Standalone: no peer, nothing to wait for.
import {
  type DiscardedWork,
  decodePrimaryMessage,
  encodeStandbyMessage,
  GRANTED,
  type GrantState,
  grantBinds,
  grantDue,
  grpcLink,
  identityRefusal,
  type Link,
  lowerEpochRefusal,
  mayAcquire,
  NO_GRANT,
  NO_HELLO,
  NO_REPLICATION,
  otherPrimaryWins,
  type PrimaryMessage,
  primaryLeaseEndMs,
  RELEASE_ALL,
  type ReleaseView,
  type ReplicationGauges,
  ReplicationLog,
  releasableSeq,
  resyncProgress,
  type SessionView,
  type SoloMark,
  type StandbyLinkState,
  type StandbyMessage,
  type StateDiscarded,
  soloMarkAt,
  soloWork,
  stateDiscardedOnStepDown,
  stepGrant,
  stepPeerLease,
  stepSoloMark,
  type WorkCounters,
  type wire,
} from "@vgpu-ha/common";
import { ErrorCode, VgpuError } from "@vgpu-ha/common/core";
import { Backend, computeDigest, SnapshotSource } from "@vgpu-ha/gpu-model";
import {
  GuestService,
  IdleSessions,
  listSessions,
  ReplicationClient,
  Sender,
  type SenderEvent,
  Sequencer,
  SessionAdmission,
  TenantAuth,
} from "@vgpu-ha/primary";
import type { ReplicationCall } from "@vgpu-ha/standby";
import type { EtcdArbiter } from "../lease/etcd-arbiter.js";
import { LeaseThread } from "../lease/lease-thread.js";
import { backendOptions, sessionLimits } from "./backend-options.js";
import type { GuestStream, Role, RoleDeps, VerifyResult } from "./role.js";

/** The idle reaper checks every tenth of guest.sessionIdleSeconds, within these bounds. */
const REAP_CHECK_MIN_MS = 100;
const REAP_CHECK_MAX_MS = 5_000;
/** Sessions one check closes at most (the rest wait for the next one). */
const REAP_MAX_PER_CHECK = 256;
/** How long an operator's close waits for the standby to apply it. */
const CLOSE_WAIT_MS = 5_000;

/** A standby's state handed over at promotion. */
export interface Takeover {
  readonly backend: Backend;
  readonly lastSeq: number;
}

type LeaseState = "alone" | "leased" | "fenced" | "degraded";

export class PrimaryRole implements Role {
  readonly name: "primary" | "standalone";
  private readonly deps: RoleDeps;
  readonly backend: Backend;
  readonly log: ReplicationLog;
  readonly sequencer: Sequencer;
  readonly guests: GuestService;
  readonly sender: Sender | undefined;
  private readonly client: ReplicationClient | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private leaseTimer: NodeJS.Timeout | undefined;
  private reapTimer: NodeJS.Timeout | undefined;
  /** Which sessions have no stream attached, since when (guest.sessionIdleSeconds). */
  private readonly idle: IdleSessions;
  private stopping = false;
  /** Snapshot ids grow across restarts too (a standby ignores chunk 0 of an older id). */
  private nextSnapshotId = Date.now() * 1000;
  private nextCheckpoint = 1;
  private readonly checkpointWaiters = new Map<
    number,
    (e: SenderEvent & { kind: "checkpoint" }) => void
  >();
  private lastMmio = { storesSeen: 0, pageBatches: 0, pagesShipped: 0, bytesShipped: 0 };
  lease: LeaseState;
  private fencedSinceMs: number | undefined;
  /** When the lease was last stepped: stepPeerLease notices this process was stopped. */
  private leaseSteppedMs: number | undefined;
  /** The highest seq a standby of this epoch confirmed applied. */
  private confirmedSeq = 0;
  /** The standby's sync grant (core/release.ts; etcd mode: whether the record names it). */
  private grant: GrantState = NO_GRANT;
  /** etcd mode: a request to etcd is under way (one at a time). */
  private etcdBusy = false;
  private etcdLastTryMs = Number.NEGATIVE_INFINITY;
  /** A planned switchover in progress: guests paused, handover sent at this seq. */
  private handingOver: { lastSeq: number; digest: string; done: () => void } | undefined;
  /** Where solo work began (degraded): what a step-down discards. */
  private solo: SoloMark | undefined;

  private readonly promoted: boolean;
  private digestWarm = false;
  /** The standby accepted a handover: guests go to it from now on. */
  private handedOff = false;

  constructor(deps: RoleDeps, takeover?: Takeover) {
    this.deps = deps;
    this.promoted = takeover !== undefined;
    const { config, logger, metrics, clock } = deps;
    this.name = config.role === "standalone" ? "standalone" : "primary";
    // A primary streams to its peer; one that does not know its peer's address serves alone.
    const replicating = this.name === "primary" && config.peer.replicationAddress !== undefined;
    const perPage = config.mmio.replication === "per-page";
    this.backend = takeover?.backend ?? new Backend(backendOptions(config, false));
    this.backend.trackMmio = replicating && perPage;
    this.log = new ReplicationLog(takeover?.lastSeq ?? 0);
    this.sequencer = new Sequencer(
      this.backend,
      this.log,
      { mmio: config.mmio.replication, flushBytes: config.mmio.flushBytes },
      () => clock.monotonicMs(),
    );
    this.lease = replicating ? "fenced" : "alone";
    if (replicating) {
      const r = config.replication;
      this.sender = new Sender(
        {
          clusterId: config.clusterId,
          nodeId: config.nodeId,
          peerName: config.peer.name,
          maxBatchEntries: r.maxBatchEntries,
          maxBatchBytes: r.maxBatchBytes,
          maxInflightEntries: r.maxInflightEntries,
          maxInflightBytes: r.maxInflightBytes,
          snapshotWindowChunks: r.snapshotWindowChunks,
          heartbeatMs: config.lease.heartbeatMs,
          retransmitMs: r.retransmitMs,
          retainBytes: r.retainBytes,
        },
        this.log,
        () => this.startSnapshot(),
        deps.supervisor.epoch(),
      );
      if (deps.leaseThread) {
        // Our lease channel's key, sent in every hello over the (mutually authenticated, when
        // tls is on) replication stream: the standby's lease thread takes only what it signs.
        const key = LeaseThread.newKey();
        this.sender.leaseKey = key;
        deps.leaseThread.primary(key, deps.supervisor.epoch());
      }
      this.client = new ReplicationClient({
        address: config.peer.replicationAddress!,
        ...(deps.peerChannel ? { channel: deps.peerChannel } : {}),
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
    this.idle = new IdleSessions(config.guest.sessionIdleSeconds * 1000);
    this.guests = new GuestService({
      idle: this.idle,
      sequencer: this.sequencer,
      auth: new TenantAuth(config.tenants),
      admission: new SessionAdmission(sessionLimits(config), () => clock.monotonicMs()),
      refusals: {
        perSecond: config.limits.refusedFramesPerSecond,
        burst: config.limits.refusedFramesBurst,
      },
      nowMs: () => clock.monotonicMs(),
      metrics,
      log: logger,
      nodeId: config.nodeId,
      epoch: () => deps.supervisor.epoch(),
      maxFramesInFlight: config.guest.maxFramesInFlight,
      maxMessageBytes: config.guest.maxMessageBytes,
      serving: () => !this.stopping && !this.handedOff,
      replicatedSeq: () => this.releasableSeq(),
      afterApply: () => this.afterGuestMessage(),
      redirect: () => config.peer.guestAddress ?? "",
      clusterId: config.clusterId,
      openTimeoutMs: config.guest.openTimeoutMs,
      ...(deps.guestRefused ? { onRefused: deps.guestRefused } : {}),
    });
  }

  start(): void {
    if (this.idle.idleMs > 0) {
      const everyMs = Math.min(
        REAP_CHECK_MAX_MS,
        Math.max(REAP_CHECK_MIN_MS, this.idle.idleMs / 10),
      );
      this.reapTimer = setInterval(() => this.reapIdle(), everyMs);
    }
    if (!this.client) return;
    this.fencedSinceMs = this.deps.clock.monotonicMs();
    if (this.promoted) {
      // Promotion followed the old primary's lease expiry: it has stopped acknowledging, so
      // this node serves at once, alone until its new standby (the old primary) rejoins.
      this.lease = "degraded";
      this.confirmedSeq = this.log.lastSeq;
      this.solo = soloMarkAt(this.confirmedSeq, this.workCounters());
    }
    if (this.deps.arbiter) this.deps.arbiter.onLost = () => this.checkLease();
    this.client.start();
    const tickMs = Math.max(5, Math.floor(this.deps.config.lease.heartbeatMs / 2));
    this.leaseTimer = setInterval(() => this.checkLease(), tickMs);
  }

  async stop(reason: string): Promise<void> {
    this.stopping = true;
    if (this.sender) this.deps.leaseThread?.none();
    clearTimeout(this.flushTimer);
    clearInterval(this.leaseTimer);
    clearInterval(this.reapTimer);
    this.guests.endAll(reason);
    this.client?.stop();
    this.sender?.disconnected();
  }

  serveGuest(stream: GuestStream): void {
    this.guests.serve(stream);
  }

  // ---- sessions: the idle reaper and operators ----

  /**
   * Closes the sessions idle past guest.sessionIdleSeconds; not while fenced (peer or etcd
   * lease: the entries would wait, and a standby taking over starts its own idle clocks) nor
   * during a switchover.
   */
  private reapIdle(): void {
    if (this.stopping || this.handedOff || this.handingOver) return;
    if (this.leaseState() === "fenced") return; // etcd mode: without its etcd lease

    this.guests.reapIdle(REAP_MAX_PER_CHECK);
  }

  sessions(tenant?: string): SessionView[] {
    return listSessions(this.backend, this.idle, this.deps.clock, tenant);
  }

  /**
   * Operator: ends a session through the log. Resolves once the standby has applied the close
   * (or at once without one, or after CLOSE_WAIT_MS with `replicated: false`).
   */
  async closeSession(id: string, by: string): Promise<Record<string, unknown> | undefined> {
    if (this.stopping || this.handedOff || this.handingOver) {
      throw new VgpuError(ErrorCode.NOT_PRIMARY, "this node does not serve guests now");
    }
    const ended = this.guests.endSession(id, "operator");
    if (ended === undefined) return undefined;
    const { logger, metrics, clock } = this.deps;
    metrics.sessionsClosedByOperator.inc({ tenant: ended.tenant });
    logger.warn(
      { seq: ended.seq, session: id, tenant: ended.tenant, by },
      "session closed by an operator",
    );
    const deadline = clock.monotonicMs() + CLOSE_WAIT_MS;
    const applied = () => !this.sender || this.sender.appliedSeq >= ended.seq;
    while (!applied() && !this.stopping && clock.monotonicMs() < deadline) {
      await new Promise((r) => setTimeout(r, 5));
    }
    return { id, tenant: ended.tenant, seq: ended.seq, replicated: applied() };
  }

  // ---- the lease ----

  /**
   * The send time of the newest acknowledged heartbeat, on either carrier: the replication
   * stream, or the lease channel (the lease thread: lease-channel.ts). 0 when none.
   */
  private ackedHeartbeatMs(): number {
    const stream = this.sender!.ackedHeartbeatUs / 1000;
    return Math.max(stream, this.deps.leaseThread?.ackedSentMs() ?? 0);
  }

  private leaseEndMs(): number {
    const t = this.deps.config.lease;
    return primaryLeaseEndMs(this.ackedHeartbeatMs(), {
      leaseMs: t.durationMs,
      heartbeatMs: t.heartbeatMs,
      driftMarginMs: t.driftMarginMs,
      maxDriftRatio: t.maxDriftRatio,
    });
  }

  /** Moves between leased, fenced and degraded; called on a timer and on every ack. */
  private checkLease(): void {
    const sender = this.sender;
    if (!sender || this.stopping || this.lease === "alone") return;
    // The lease thread renews only while our stream to the peer is up (else the old rules
    // apply: fenced, then degraded) — and only while this loop turns (its watchdog).
    this.deps.leaseThread?.setRenewing(sender.state === "snapshot" || sender.state === "streaming");
    sender.maintenancePaused = this.deps.supervisor.maintenancePaused();
    this.warmDigest();
    const now = this.deps.clock.monotonicMs();
    const { logger } = this.deps;
    const before = this.lease;
    const step = stepPeerLease(
      { lease: this.lease, fencedSinceMs: this.fencedSinceMs, steppedMs: this.leaseSteppedMs },
      now,
      this.ackedHeartbeatMs() > 0 ? this.leaseEndMs() : undefined,
      this.deps.config.lease.durationMs,
    );
    this.lease = step.lease;
    this.fencedSinceMs = step.fencedSinceMs;
    this.leaseSteppedMs = step.steppedMs;
    this.solo = stepSoloMark(this.lease, this.solo, this.confirmedSeq, this.workCounters());
    if (this.deps.arbiter) {
      this.etcdTick(now, this.deps.arbiter);
    } else {
      // Serving alone: the standby's grant is revoked before anything it lacks goes out.
      this.updateGrant();
    }
    if (before !== this.lease) {
      const fields = { seq: this.log.lastSeq, from: before, to: this.lease };
      if (this.lease === "leased") logger.warn(fields, "lease held: replicating");
      else if (this.lease === "fenced")
        logger.warn(fields, "lease lapsed: holding replies (fenced)");
      else logger.error(fields, "no standby: serving alone (degraded)");
      this.guests.release();
    }
  }

  private releaseView(): ReleaseView {
    const sender = this.sender!;
    const now = this.deps.clock.monotonicMs();
    // The timer may not have run yet since the lease ended: judge by the clock.
    const lapsed = this.lease === "leased" && now >= this.leaseEndMs();
    const link: StandbyLinkState =
      sender.state === "streaming"
        ? "streaming"
        : sender.state === "snapshot"
          ? "snapshot"
          : "down";
    const arbiter = this.deps.arbiter;
    let lease = lapsed || this.lease === "alone" ? "fenced" : this.lease;
    // etcd mode: the right to serve is the etcd lease alone; the grant is in the record.
    if (arbiter) lease = now < arbiter.leaseEndMs() ? "leased" : "fenced";
    return {
      mode: this.deps.config.replication.mode,
      lease,
      link,
      granted: grantBinds(this.grant),
      appliedSeq: sender.appliedSeq,
      confirmedSeq: this.confirmedSeq,
    };
  }

  /**
   * Grants the standby once it has everything released; revokes the grant once a snapshot
   * has replaced its state (its first chunk acknowledged: it is no longer a replica) or while
   * serving alone (see stepGrant).
   */
  private updateGrant(): void {
    const sender = this.sender!;
    this.setGrant(
      stepGrant(this.grant, {
        ...this.releaseView(),
        releasedSeq: this.guests.releasedSeq,
        snapshotChunksAcked: sender.snapshotProgress?.chunksAcked ?? 0,
        nowUs: Math.round(this.deps.clock.monotonicMs() * 1000),
        echoedUs: sender.ackedHeartbeatUs,
      }),
    );
  }

  private setGrant(grant: GrantState): void {
    const granted = grant.granted;
    const changed = granted !== this.grant.granted;
    this.grant = grant;
    if (!changed) return;
    this.sender!.syncGrant = granted;
    this.deps.logger.info(
      { seq: this.log.lastSeq, appliedSeq: this.sender!.appliedSeq },
      granted ? "standby granted: it may take over" : "standby's grant revoked",
    );
  }

  /**
   * etcd mode: keeps the record's `replica` in step with the grant — named once the standby
   * has everything released (the heartbeat grant follows the write), cleared (and only then
   * the grant dropped) when the standby's link lapses or a snapshot replaced its state. A
   * node that lost the key tries to take it back while it may (it holds the newest state).
   */
  private etcdTick(now: number, arbiter: EtcdArbiter): void {
    if (this.etcdBusy || this.stopping) return;
    const sender = this.sender!;
    const { config, logger } = this.deps;
    if (!arbiter.holding) {
      // A switchover gave the key up for the standby: never take it back.
      if (this.handingOver) return;
      if (now - this.etcdLastTryMs < config.lease.etcd.pollMs) return;
      this.etcdLastTryMs = now;
      this.etcdRun(() => this.retakeKey(arbiter));
      return;
    }
    if (now >= arbiter.leaseEndMs()) return; // fenced until a keepalive is answered
    const epoch = this.deps.supervisor.epoch();
    const replaced = sender.state === "snapshot" && (sender.snapshotProgress?.chunksAcked ?? 0) > 0;
    if (this.grant.granted && (this.lease !== "leased" || replaced)) {
      sender.syncGrant = false;
      this.etcdRun(async () => {
        if (!(await arbiter.setReplica(epoch, ""))) return;
        this.grant = NO_GRANT;
        logger.error({ seq: this.log.lastSeq }, "etcd: standby no longer named: serving alone");
        this.guests.release();
      });
    } else if (
      !this.grant.granted &&
      this.lease === "leased" && // heartbeats answered: a link that only seems up does not count
      grantDue({ ...this.releaseView(), releasedSeq: this.guests.releasedSeq })
    ) {
      this.grant = GRANTED; // from now on only what the standby confirms goes out
      this.etcdRun(() => this.nameStandby(arbiter, epoch));
    } else if (this.grant.granted && !sender.syncGrant && this.lease === "leased") {
      this.etcdRun(() => this.nameStandby(arbiter, epoch)); // an earlier write failed
    }
  }

  /**
   * etcd mode, a handover accepted: the standby holds everything (guests are held), so name it
   * in the record — a lapse during the handover may have cleared the name — then give the key
   * up for it. If etcd refuses, keep the key: the switchover times out and this node serves on.
   */
  private async handKeyOver(arbiter: EtcdArbiter): Promise<void> {
    if (!(await arbiter.setReplica(this.deps.supervisor.epoch(), this.deps.config.peer.name))) {
      return;
    }
    await arbiter.resign();
  }

  private async nameStandby(arbiter: EtcdArbiter, epoch: number): Promise<void> {
    if (!(await arbiter.setReplica(epoch, this.deps.config.peer.name))) return;
    this.sender!.syncGrant = true;
    this.deps.logger.info({ seq: this.log.lastSeq }, "etcd: standby named: it may take over");
  }

  /** Lost the key but still holding the newest state: take it back when the rule allows. */
  private async retakeKey(arbiter: EtcdArbiter): Promise<void> {
    const { config, supervisor, logger } = this.deps;
    const view = await arbiter.read();
    if (view.leader) return; // another took it: its higher epoch will reach us
    const decision = mayAcquire({
      me: config.nodeId,
      configuredPrimary: config.role === "primary",
      leaderPresent: false,
      record: view.record,
      mine: "primary-state",
      peer: undefined,
      localEpoch: supervisor.epoch(),
    });
    if (!decision.acquire) return;
    if (!(await arbiter.acquire(view, decision.epoch, config.guest.listen))) return;
    supervisor.adoptEpoch(decision.epoch);
    this.sender!.epoch = decision.epoch;
    this.grant = NO_GRANT;
    this.sender!.syncGrant = false;
    // `keyEpoch`: the logger already binds `epoch` (a repeated key would be invalid JSON).
    logger.warn({ seq: this.log.lastSeq, keyEpoch: decision.epoch }, "etcd: took the key back");
    this.guests.release();
  }

  private etcdRun(work: () => Promise<void>): void {
    this.etcdBusy = true;
    work()
      .catch((e: Error) => this.deps.logger.warn({ err: e.message }, "etcd: request failed"))
      .finally(() => {
        this.etcdBusy = false;
      });
  }

  /**
   * Once a standby is granted (a switchover becomes possible), computes the state digest once
   * off the switchover's path: its first run in a process is several times slower (code not
   * yet compiled), and a switchover's pause waits for one.
   */
  private warmDigest(): void {
    if (this.digestWarm || !this.grant.granted) return;
    this.digestWarm = true;
    setImmediate(() => {
      if (!this.stopping) computeDigest(this.backend);
    });
  }

  /** Which replies may go out now (see GuestServiceDeps.replicatedSeq). */
  private releasableSeq(): number | undefined {
    if (!this.sender) return undefined;
    const seq = releasableSeq(this.releaseView());
    return seq === RELEASE_ALL ? undefined : seq;
  }

  /**
   * Work since the solo mark may be discarded if a peer took over: the entries after the last
   * seq a standby confirmed, and the frames and sessions applied since the lease was lost
   * (their replies go out if this node ends up serving alone).
   */
  private workCounters(): WorkCounters {
    return { lastSeq: this.log.lastSeq, ...this.guests.applied };
  }

  /** What stepping down now would throw away. */
  soloWork(): DiscardedWork {
    return soloWork(this.solo, this.workCounters());
  }

  /** The whole state a step-down without a handover would throw away. */
  stateOnStepDown(handedOver: boolean): StateDiscarded {
    const c = this.counts();
    const held = { sessions: c.sessions, contexts: c.contexts, vramBytes: c.vramUsed };
    return stateDiscardedOnStepDown(handedOver, held, this.log.lastSeq, this.confirmedSeq);
  }

  /**
   * Another primary dials us: the lower epoch steps down — but only our own peer's epoch counts.
   * A hello from another cluster or another node than peer.name is refused before its epoch is
   * read (peer-identity.ts), and changes nothing here.
   */
  acceptReplication(call: ReplicationCall): void {
    const link = grpcLink<StandbyMessage, PrimaryMessage, wire.StandbyMessage, wire.PrimaryMessage>(
      call,
      encodeStandbyMessage,
      decodePrimaryMessage,
    );
    const mine = this.deps.supervisor.epoch();
    const { config } = this.deps;
    let first = true;
    link.onMessage((m: PrimaryMessage) => {
      if (!first) return;
      first = false;
      const rule = {
        clusterId: config.clusterId,
        nodeId: config.nodeId,
        peerName: config.peer.name,
      };
      const who = m.kind === "hello" ? identityRefusal(rule, m) : NO_HELLO;
      if (who !== null || m.kind !== "hello") {
        const refusal = who ?? NO_HELLO;
        this.deps.refusals.report(refusal, call.getPeer(), "inbound");
        link.send({ kind: "error", epoch: 0, code: refusal.code, message: refusal.message });
        link.close("not our peer");
        return;
      }
      const theirs = m.epoch;
      const self = { epoch: mine, nodeId: this.deps.config.nodeId };
      if (otherPrimaryWins(self, m)) {
        link.close("stepping down");
        this.deps.supervisor.stepDown(theirs, `met primary ${m.nodeId} of epoch ${theirs}`);
      } else {
        const { clusterId, nodeId } = config;
        for (const out of lowerEpochRefusal({ clusterId, nodeId, epoch: mine })) link.send(out);
        setTimeout(() => link.close("refused a lower epoch"), 100);
      }
    });
    void (link as Link<StandbyMessage, PrimaryMessage>);
  }

  probe() {
    return { role: "primary" as const, replica: false, appliedSeq: this.log.lastSeq };
  }

  // ---- replication plumbing ----

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
    if (this.sender?.inSync)
      this.confirmedSeq = Math.max(this.confirmedSeq, this.sender.appliedSeq);
    this.checkLease();
    this.guests.release();
    this.applyBackPressure();
  }

  /** Holds guests back while the standby lags beyond the configured bound. */
  private applyBackPressure(): void {
    const sender = this.sender!;
    if (this.handingOver) return; // guests stay paused until the handover completes
    const r = this.deps.config.replication;
    if (sender.state !== "streaming" && sender.state !== "snapshot") {
      this.guests.setPaused(false);
      return;
    }
    const snapshot = sender.state === "snapshot";
    const lag = this.log.lagAfter(
      snapshot ? (sender.snapshotProgress?.atSeq ?? 0) : sender.appliedSeq,
      this.deps.clock.monotonicMs(),
    );
    // The time bound keeps heartbeats (queued behind the backlog) inside the lease; during a
    // snapshot the entries wait for its end anyway, so only size bounds apply then.
    const maxLagMs = r.maxLagMs ?? this.deps.config.lease.durationMs * 0.4;
    const tooOld = !snapshot && lag.seconds * 1000 > maxLagMs;
    this.guests.setPaused(lag.entries > r.maxLagEntries || lag.bytes > r.maxLagBytes || tooOld);
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
    const seq = this.log.lastSeq;
    switch (e.kind) {
      case "snapshotStarted":
        metrics.snapshots.inc({ event: "started" });
        break;
      case "snapshotResumed":
        metrics.snapshots.inc({ event: "resumed" });
        logger.warn({ seq, snapshot: e.snapshotId, chunk: e.chunk }, "snapshot resumed");
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
        logger.warn({ seq, reason: e.reason, detail: e.detail }, "standby asked for a resync");
        if (e.reason === "diverged") metrics.divergences.inc();
        break;
      case "refused":
        if (e.reason !== undefined) {
          const address = this.deps.config.peer.replicationAddress ?? "";
          this.deps.refusals.report({ reason: e.reason, message: e.message }, address, "outbound");
        } else {
          logger.error({ seq, code: e.code, message: e.message }, "standby refused us");
        }
        break;
      case "higherEpoch":
        metrics.staleEpochRefusals.inc();
        this.deps.supervisor.stepDown(e.epoch, `peer is at epoch ${e.epoch}`);
        break;
      case "checkpoint":
        this.checkpointWaiters.get(e.requestId)?.(e);
        break;
      case "handoverAccepted":
        // Stepping down here, before the standby serves, was measured slower: guests bounced
        // between two refusing nodes. The new primary's dial makes this node step down.
        this.deps.logger.info({ seq: this.log.lastSeq }, "switchover: the standby accepted");
        // Send the guests over now: the standby parks them until it serves as primary.
        this.handedOff = true;
        this.guests.endAll("switchover: the standby is taking over");
        // etcd mode: the standby takes over only by taking the key: give it up.
        if (this.deps.arbiter) this.etcdRun(() => this.handKeyOver(this.deps.arbiter!));
        break;
    }
  }

  /**
   * Planned switchover: stop taking frames, wait until the standby has applied everything and
   * every reply is out, then hand over with the state digest. The standby takes over at once
   * (epoch + 1); this node then becomes its standby with the same state (no snapshot).
   * Resolves when this node has stepped down.
   */
  async switchover(timeoutMs = 10_000): Promise<{ seq: number; digest: string; pauseMs: number }> {
    const sender = this.sender;
    if (!sender?.inSync || this.lease !== "leased") {
      throw new VgpuError(ErrorCode.HANDOVER_FAILED, "no standby in sync to hand over to");
    }
    if (this.handingOver) throw new VgpuError(ErrorCode.SWITCHOVER_IN_PROGRESS);
    const started = this.deps.clock.monotonicMs();
    this.guests.setPaused(true);
    this.handingOver = { lastSeq: -1, digest: "", done: () => undefined };
    try {
      this.sequencer.flushMmio();
      // Announce the handover at the last seq (an empty digest): the standby computes its
      // digest there while this node computes its own — side by side, not one after the other.
      const announcedSeq = this.log.lastSeq;
      sender.handover("");
      this.client!.pumpNow();
      const early = computeDigest(this.backend).state;
      const deadline = started + timeoutMs;
      // etcd mode: the standby takes over only by the record naming it: wait until it does.
      const unnamed = () => this.deps.arbiter !== undefined && !sender.syncGrant;
      while (sender.appliedSeq < this.log.lastSeq || this.guests.heldReplies > 0 || unnamed()) {
        if (this.deps.clock.monotonicMs() > deadline || !sender.inSync) {
          throw new Error(
            `standby at ${sender.appliedSeq} of ${this.log.lastSeq}: not handing over`,
          );
        }
        await new Promise((r) => setTimeout(r, 2));
      }
      const lastSeq = this.log.lastSeq;
      const digest = lastSeq === announcedSeq ? early : computeDigest(this.backend).state;
      const done = new Promise<void>((resolve, reject) => {
        this.handingOver = { lastSeq, digest, done: resolve };
        const late = new VgpuError(ErrorCode.STANDBY_TIMED_OUT, "the standby did not take over");
        setTimeout(() => reject(late), timeoutMs);
      });
      this.deps.logger.warn({ seq: lastSeq, digest }, "switchover: handing over");
      sender.handover(digest);
      this.client!.pumpNow();
      await done;
      return { seq: lastSeq, digest, pauseMs: this.deps.clock.monotonicMs() - started };
    } catch (e) {
      this.handingOver = undefined;
      sender.cancelHandover();
      // etcd mode: a standby that accepted but did not get the key cannot serve; the key
      // decides, so guests may come back. (Peer mode: it took over; its dial steps us down.)
      if (this.deps.arbiter) this.handedOff = false;
      this.guests.setPaused(false);
      throw e;
    }
  }

  /** The state to keep when stepping down after a handover (equal to the new primary's). */
  handedOver(): { backend: Backend; lastSeq: number } | undefined {
    const h = this.handingOver;
    if (!h || h.lastSeq !== this.log.lastSeq) return undefined;
    return { backend: this.backend, lastSeq: h.lastSeq };
  }

  /** Called by the node once it has stepped down. */
  steppedDown(): void {
    this.handingOver?.done();
  }

  async verify(): Promise<VerifyResult> {
    const sender = this.sender;
    if (!sender?.inSync) throw new VgpuError(ErrorCode.NO_STANDBY_IN_SYNC);
    const digest = computeDigest(this.backend).state;
    const requestId = this.nextCheckpoint++;
    const seq = this.sequencer.checkpoint(digest, requestId);
    this.afterGuestMessage();
    const answer = await new Promise<SenderEvent & { kind: "checkpoint" }>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.checkpointWaiters.delete(requestId);
        reject(
          new VgpuError(
            ErrorCode.STANDBY_TIMED_OUT,
            `standby did not reach seq ${seq} within 30 s`,
          ),
        );
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

  /** The snapshot being sent to the standby, for the resync progress (undefined: none). */
  snapshotProgress() {
    return this.sender?.snapshotProgress;
  }

  /** A standby is attached (streaming, or taking a snapshot): lag means something. */
  private standbyAttached(): boolean {
    const state = this.sender?.state;
    return state === "streaming" || state === "snapshot";
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
    const now = this.deps.clock.monotonicMs();
    const lag = this.log.lagAfter(sender.appliedSeq, now);
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
      degraded: this.leaseState() === "degraded",
      leaseRemainingSeconds: Math.max(0, (this.servingLeaseEndMs() - now) / 1000),
    };
  }

  /** Until when this node may acknowledge (peer: the lease; etcd: its etcd lease). */
  private servingLeaseEndMs(): number {
    const arbiter = this.deps.arbiter;
    if (arbiter) return arbiter.leaseEndMs();
    return this.lease === "leased" ? this.leaseEndMs() : Number.NEGATIVE_INFINITY;
  }

  /** The lease state shown to operators (etcd: fenced without the key's lease, degraded when serving without a named standby). */
  private leaseState(): "alone" | "leased" | "fenced" | "degraded" {
    if (!this.deps.arbiter || !this.sender) return this.lease;
    if (this.releaseView().lease === "fenced") return "fenced";
    // Without a named standby no failover is possible: degraded, even while the stream looks
    // up (a blackholed TCP connection stays "streaming" for seconds after a partition heals).
    return this.grant.granted ? "leased" : "degraded";
  }

  readiness() {
    if (this.stopping) return { ready: false, reason: "shutting down" };
    const state = this.leaseState();
    if (state === "fenced")
      return { ready: false, reason: "primary without lease: holding replies" };
    return { ready: true, reason: `${this.name} and serving (${state})` };
  }

  status(): Record<string, unknown> {
    const { config } = this.deps;
    const r = this.replicationGauges();
    const c = this.sequencer.mmioCounters;
    return {
      role: this.name,
      serving: !this.stopping,
      lease: this.sender
        ? {
            mode: config.lease.mode,
            state: this.leaseState(),
            remainingSeconds: r.leaseRemainingSeconds,
            standbyGranted: this.grant.granted,
            ...(this.deps.arbiter ? { etcdKeyHeld: this.deps.arbiter.holding } : {}),
          }
        : null,
      degraded: r.degraded,
      seq: { last: r.lastSeq, applied: r.appliedSeq, acknowledged: r.acknowledgedSeq },
      replication: this.sender
        ? {
            mode: config.replication.mode,
            peer: config.peer.name,
            peerAddress: config.peer.replicationAddress,
            state: this.sender.state,
            connected: r.connected,
            // No standby: no lag to speak of (the numbers would only grow).
            standby: this.standbyAttached() ? "attached" : "none",
            lag: this.standbyAttached()
              ? { entries: r.lagEntries, bytes: r.lagBytes, seconds: r.lagSeconds }
              : null,
            heldReplies: this.guests.heldReplies,
            snapshot: this.snapshotStatus(),
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

  /** The snapshot in progress with its resync figures (bytes, %, rate, ETA); null when none. */
  private snapshotStatus() {
    const p = this.sender?.snapshotProgress;
    if (!p) return null;
    const { startedMs: _monotonic, ...rest } = p;
    return { ...rest, ...resyncProgress(p, this.deps.clock.monotonicMs()) };
  }
}
