// One vgpud node: the supervisor that owns the epoch (persisted before it is acted on), the
// servers (guest port, replication port, ops HTTP), and moves the node between roles:
//   start: standalone by config; otherwise ask the peer (Probe) — a peer that is primary, or a
//          standby holding a replica, makes this node a standby; else the node configured
//          `role: primary` becomes primary at epoch max(own, peer's) + 1, the other a standby.
//   promote: a standby whose primary's lease expired takes over with its replica (epoch + 1).
//   step down: a primary that meets a higher epoch becomes an empty standby (its solo work is
//          discarded, logged and counted) and resyncs from the new primary.

import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  type Clock,
  type Config,
  createClient,
  createMetrics,
  discardedOnStepDown,
  ERROR_CATALOGUE,
  ErrorCode,
  errorName,
  holdingOf,
  identityRefusal,
  initialRole,
  type Logger,
  mayAcquire,
  type NodeMetrics,
  type PeerChannel,
  type PeerIdentityRule,
  peerChannel,
  promotionEpoch,
  resyncProgress,
  standbyWithoutPrimary,
  stepDownEpoch,
  systemClock,
  type TlsFiles,
  wire,
} from "@vgpu-ha/common";
import { GuestGuard } from "@vgpu-ha/primary";
import type { FastifyInstance } from "fastify";
import { checkBeforeStart } from "./check/start-checks.js";
import { type GuestRefusalSink, guestRefusalReporter, withStreamLimit } from "./guest-listener.js";
import { EtcdArbiter } from "./lease/etcd-arbiter.js";
import { LeaseThread } from "./lease/lease-thread.js";
import { buildOpsApp } from "./ops/ops-app.js";
import { type ReplicationRefusals, replicationRefusals } from "./replication-refusals.js";
import { PrimaryRole } from "./roles/primary-role.js";
import type { PeerView, Role, RoleDeps, Supervisor } from "./roles/role.js";
import { StandbyRole } from "./roles/standby-role.js";
import { type GrpcServer, guestService, replicationService, startGrpcServer } from "./servers.js";
import { EpochStore } from "./state/epoch-store.js";
import { HistoryStore, type RoleChange } from "./state/history-store.js";
import { type Maintenance, MaintenanceStore } from "./state/maintenance-store.js";
import { tlsRefusalReporter } from "./tls-listener.js";
import { VERSION } from "./version.js";

export interface NodeAddresses {
  readonly guest: string;
  readonly ops: string;
  readonly replication?: string;
}

export class VgpuNode implements Supervisor {
  readonly config: Config;
  readonly metrics: NodeMetrics;
  private readonly baseLog: Logger;
  log: Logger;
  private readonly clock: Clock;
  private readonly store: EpochStore;
  private readonly history: HistoryStore;
  private readonly maintenanceStore: MaintenanceStore;
  /** Maintenance mode (vgpuctl pause): no automatic takeover while set. */
  private maintenance: Maintenance | undefined;
  /** The newest role change (from the history file at start). */
  private lastChange: RoleChange | undefined;
  /** Who asked for the role change under way (an operator action); consumed by become(). */
  private askedBy: string | undefined;
  /** lease.mode etcd: the leader key and cluster record. */
  private readonly arbiter: EtcdArbiter | undefined;
  private currentEpoch = 0;
  role: Role;
  private readonly ops: FastifyInstance;
  private guestServer: GrpcServer | undefined;
  private replicationServer: GrpcServer | undefined;
  private readonly startedMs = Date.now();
  private stopping = false;
  /** Role changes run one after another. */
  private transition: Promise<void> = Promise.resolve();
  /** The tls files, read and checked at construction (a ConfigError names the bad field). */
  private readonly tls: TlsFiles | undefined;
  /** How this node dials its peer: mutual TLS naming peer.name, or plaintext. */
  private readonly peer: PeerChannel;
  /** Counts and logs (rate-limited) what the guest port's defences refuse. */
  private readonly guestRefused: GuestRefusalSink;
  /** Peer mode: the standby's look for a primary (see watchForPrimary). */
  private primaryWatch: NodeJS.Timeout | undefined;
  /** Peer mode: heartbeats on a thread of their own (lease/lease-thread.ts). */
  private leaseThread: LeaseThread | undefined;
  /** Replication peers that are not ours: counted and logged (rate-limited). */
  private readonly refusals: ReplicationRefusals;

  constructor(config: Config, log: Logger, clock: Clock = systemClock) {
    this.config = config;
    this.baseLog = log;
    this.log = log.child({ role: "starting", epoch: 0 });
    this.clock = clock;
    this.store = new EpochStore(config.stateDir);
    this.history = new HistoryStore(config.stateDir);
    this.maintenanceStore = new MaintenanceStore(config.stateDir);
    this.maintenance = this.maintenanceStore.read();
    this.lastChange = this.history.read(1)[0];
    this.tls = checkBeforeStart(config);
    this.peer = peerChannel(this.tls, config.peer.name);
    this.arbiter =
      config.lease.mode === "etcd" && config.role !== "standalone"
        ? new EtcdArbiter(config, log.child({ component: "etcd" }), clock)
        : undefined;
    this.metrics = createMetrics({
      role: () => this.role.name,
      epoch: () => this.currentEpoch,
      sessions: () => this.role.counts().sessions,
      contexts: () => this.role.counts().contexts,
      bos: () => this.role.counts().bos,
      vramUsedBytes: () => this.role.counts().vramUsed,
      vramTotalBytes: () => this.role.counts().vramTotal,
      replication: () => this.role.replicationGauges(),
      // The lease the primary serves under: the etcd lease's TTL in etcd mode.
      leaseDurationSeconds: () =>
        (config.lease.mode === "etcd" ? config.lease.etcd.ttlMs : config.lease.durationMs) / 1000,
      operator: () => ({
        pausedSinceMs: this.maintenance?.sinceMs,
        pausedMaxSeconds: config.ops.maintenanceAlertAfterMs / 1000,
        resync: this.resync(),
      }),
    });
    this.guestRefused = guestRefusalReporter(
      { warn: (fields, msg) => this.log.warn(fields, msg) },
      (reason) => this.metrics.guestRefusals.inc({ reason }),
      () => clock.monotonicMs(),
    );
    this.refusals = replicationRefusals(this.metrics, () => this.log);
    // Until start() decides, the node is a standby that serves nobody.
    this.role = new StandbyRole(this.roleDeps());
    this.ops = buildOpsApp({
      registry: this.metrics.registry,
      status: () => this.status(),
      history: () => this.history.read(),
      readiness: () =>
        this.stopping ? { ready: false, reason: "shutting down" } : this.role.readiness(),
      digest: () => {
        const d = this.role.digest();
        return d ? { nodeId: config.nodeId, seq: d.seq, ...d.digest } : undefined;
      },
      adminToken: config.ops.token,
      admin: {
        verify: async () => {
          if (!this.role.verify) throw new Error("verify runs on the primary");
          return { ...(await this.role.verify()) };
        },
        ...(config.testing.faultInjection
          ? { corrupt: () => this.role.corrupt?.(), stall: (ms: number) => busyWait(ms) }
          : {}),
        promote: (force, caller) => this.manualPromote(force, caller),
        demote: (force, caller) => this.manualDemote(force, caller),
        switchover: (_force, caller) => this.switchover(caller),
        pause: (_force, caller) => this.pause(caller),
        resume: (_force, caller) => this.resume(caller),
        reinit: (force, caller) => this.reinit(force, caller),
        sessions: (tenant) => ({
          nodeId: config.nodeId,
          role: this.role.name,
          sessions: this.role.sessions(tenant),
        }),
        closeSession: (id, by) => {
          if (!this.role.closeSession) {
            throw new OpsRefusal(409, "sessions close on the primary", ErrorCode.NOT_PRIMARY);
          }
          return this.role.closeSession(id, by);
        },
      },
      audit: (a) => {
        const fields = { remote: a.remote, method: a.method, url: a.url, status: a.status };
        if (a.status === 401 || a.status === 403) this.log.warn(fields, "admin request refused");
        else this.log.info(fields, "admin request");
      },
    });
  }

  epoch(): number {
    return this.currentEpoch;
  }

  private roleDeps(): RoleDeps {
    return {
      config: this.config,
      logger: this.log,
      metrics: this.metrics,
      clock: this.clock,
      supervisor: this,
      arbiter: this.arbiter,
      peerChannel: this.peer,
      guestRefused: this.guestRefused,
      refusals: this.refusals,
      // The roles' heartbeats use it in peer mode; in etcd mode it keeps the etcd lease.
      leaseThread: this.config.lease.mode === "peer" ? this.leaseThread : undefined,
    };
  }

  /** Persists a new epoch (write + fsync) before anything acts on it. */
  private setEpoch(epoch: number): void {
    this.store.write(epoch);
    this.currentEpoch = epoch;
  }

  async start(): Promise<NodeAddresses> {
    const { config } = this;
    this.currentEpoch = this.store.read();
    this.guestServer = await bound(
      "guest.listen",
      config.guest.listen,
      startGrpcServer(
        config.guest.listen,
        config.guest.maxMessageBytes,
        guestService({
          session: withStreamLimit(
            config.guest.maxStreamsPerConnection,
            (peer) => this.guestServer?.streamsOf(peer) ?? 0,
            this.guestRefused,
            (stream) => this.role.serveGuest(stream),
          ),
        }),
        {
          maxStreamsPerConnection: config.guest.maxStreamsPerConnection,
          guard: {
            guard: new GuestGuard(config.guest),
            nowMs: () => this.clock.monotonicMs(),
            onRefused: this.guestRefused,
          },
          ...(this.tls && config.guest.tls !== "off"
            ? {
                tls: {
                  files: this.tls,
                  clientCertificates: config.guest.tls === "mutual" ? "required" : "optional",
                  onRefused: this.tlsRefusals("guest"),
                },
              }
            : {}),
        },
      ),
    );
    if (config.role !== "standalone") {
      this.replicationServer = await bound(
        "replication.listen",
        config.replication.listen,
        startGrpcServer(
          config.replication.listen,
          config.guest.maxMessageBytes,
          replicationService({
            stream: (call) => this.role.acceptReplication(call),
            probe: (call, callback) => this.answerProbe(call, callback),
          }),
          this.tls
            ? {
                tls: {
                  files: this.tls,
                  clientCertificates: "required",
                  peerName: config.peer.name,
                  onRefused: this.tlsRefusals("replication"),
                },
              }
            : {},
        ),
      );
    }
    this.leaseThread = this.startLeaseThread();
    const initial = await this.decideRole();
    // A stream that reached the placeholder while we probed must not stay attached to it: the
    // primary redials and meets the real role.
    await this.role.stop("role decided");
    this.become(initial, initial === "primary" ? "cold_start" : "start");
    if (config.role !== "standalone" && !this.arbiter) {
      const everyMs = Math.max(1000, config.lease.durationMs * 2);
      this.primaryWatch = setInterval(() => this.watchForPrimary(), everyMs);
    }
    const [opsHost, opsPort] = splitHostPort(config.ops.listen);
    const ops = await bound(
      "ops.listen",
      config.ops.listen,
      this.ops.listen({ host: opsHost, port: opsPort }),
    );
    const host = (a: string) => a.slice(0, a.lastIndexOf(":"));
    const addresses: NodeAddresses = {
      guest: `${host(config.guest.listen)}:${this.guestServer.port}`,
      ops,
      ...(this.replicationServer
        ? { replication: `${host(config.replication.listen)}:${this.replicationServer.port}` }
        : {}),
    };
    this.log.info({ ...addresses, version: VERSION }, "node serving");
    return addresses;
  }

  /** Peer mode with lease.watchdogMs > 0: the lease thread, on the replication port over UDP. */
  private startLeaseThread(): LeaseThread | undefined {
    const { config } = this;
    const port = this.replicationServer?.port;
    if (port === undefined || config.lease.watchdogMs === 0) return undefined;
    const peerAddress = config.peer.leaseAddress ?? config.peer.replicationAddress;
    const [peerHost, peerPort] = peerAddress ? splitHostPort(peerAddress) : [];
    const [bindHost] = splitHostPort(config.replication.listen);
    const e = config.lease.etcd;
    const thread = new LeaseThread(
      {
        mode: config.lease.mode,
        etcd: {
          endpoints: e.endpoints,
          keepaliveMs: e.keepaliveMs,
          requestTimeoutMs: e.requestTimeoutMs,
          driftMarginMs: config.lease.driftMarginMs,
        },
        bindHost,
        bindPort: port,
        peer:
          peerHost !== undefined && peerPort !== undefined
            ? { host: peerHost, port: peerPort }
            : undefined,
        heartbeatMs: config.lease.heartbeatMs,
        watchdogMs: config.lease.watchdogMs,
        progressEveryMs: Math.max(5, Math.min(50, Math.floor(config.lease.heartbeatMs / 2))),
        mainNowMs: () => this.clock.monotonicMs(),
      },
      this.baseLog.child({ component: "lease-thread" }),
    );
    const arbiter = this.arbiter;
    if (arbiter) {
      // etcd mode: the thread keeps the leader key's lease alive beside the main loop.
      arbiter.onHolding = (lease) => thread.etcd(lease?.leaseId);
      arbiter.threadEndMs = () => thread.etcdEndMs();
      thread.onEtcdLost = (id) => arbiter.lost(id);
    }
    return thread;
  }

  private tlsRefusals(port: "guest" | "replication") {
    return tlsRefusalReporter(
      port,
      { warn: (fields, msg) => this.log.warn(fields, msg) },
      (labels) => this.metrics.tlsRefusals.inc(labels),
    );
  }

  /** The first role: see the comment at the top of this file. */
  private async decideRole(): Promise<"standalone" | "primary" | "standby"> {
    const { config } = this;
    if (config.role === "standalone") {
      if (this.currentEpoch === 0) this.setEpoch(1);
      return "standalone";
    }
    if (this.arbiter) return this.decideEtcdRole(this.arbiter);
    const decided = initialRole(config.role, this.currentEpoch, await this.askPeer());
    if (decided.epoch !== this.currentEpoch) this.setEpoch(decided.epoch);
    return decided.role;
  }

  /**
   * Peer mode: a standby with no primary in sight — none has spoken to it, or the one it
   * followed went silent and it may not take over — asks its peer and acts on the answer, so
   * the pair does not stay without a primary when one of them can serve (see
   * standbyWithoutPrimary). etcd mode leaves this to the leader key (mayAcquire).
   */
  private watchForPrimary(): void {
    this.transition = this.transition.then(async () => {
      const standby = this.role;
      if (this.stopping || !(standby instanceof StandbyRole) || standby.primaryInSight()) return;
      const peer = await this.askPeer();
      if (this.role !== standby || standby.primaryInSight()) return;
      const self = {
        configured: this.config.role === "primary" ? "primary" : "standby",
        epoch: this.currentEpoch,
        holdsReplica: standby.holdsReplica,
      } as const;
      const decided = standbyWithoutPrimary(self, peer);
      if (decided.action === "wait") return;
      if (decided.action === "takeOver" && this.maintenancePaused()) {
        this.log.warn({ peer }, "maintenance mode: not taking over (vgpuctl resume to allow it)");
        return;
      }
      this.log.warn({ peer, decided }, "no primary in sight and the peer holds nothing");
      if (decided.action === "takeOver") {
        this.adoptEpoch(decided.epoch - 1);
        void this.promote("recovery", true);
        return;
      }
      this.setEpoch(decided.epoch);
      await standby.stop("starting the pair");
      this.become("primary", "cold_start");
    });
  }

  /**
   * etcd mode: primary only by taking the leader key (core/etcd-lease.ts mayAcquire); a node
   * that cannot (key held, etcd away, the state may be elsewhere) starts as a standby, which
   * keeps watching the key.
   */
  private async decideEtcdRole(arbiter: EtcdArbiter): Promise<"primary" | "standby"> {
    try {
      const view = await arbiter.read();
      if (view.leader) {
        if (view.leader.epoch > this.currentEpoch) this.setEpoch(view.leader.epoch);
        return "standby";
      }
      const peer = await this.askPeer();
      const decision = mayAcquire({
        me: this.config.nodeId,
        configuredPrimary: this.config.role === "primary",
        leaderPresent: false,
        record: view.record,
        mine: "nothing",
        peer: peer && { nodeId: peer.nodeId, holds: holdingOf(peer) },
        localEpoch: this.currentEpoch,
      });
      this.log.warn({ decision }, "etcd: starting");
      if (!decision.acquire) return "standby";
      if (!(await arbiter.acquire(view, decision.epoch, this.config.guest.listen))) {
        return "standby";
      }
      this.setEpoch(decision.epoch);
      return "primary";
    } catch (e) {
      this.log.error({ err: (e as Error).message }, "etcd: unreachable at start: standby");
      return "standby";
    }
  }

  /** Supervisor.probePeer: asks the peer what it is and holds (undefined: no answer). */
  probePeer(done: (peer: PeerView | undefined) => void): void {
    const address = this.config.peer.replicationAddress;
    if (!address) {
      done(undefined);
      return;
    }
    const client = createClient(
      wire.Replication,
      address,
      this.peer.credentials,
      this.peer.options,
    );
    const answer = (peer: PeerView | undefined) => {
      client.close();
      done(peer);
    };
    const request = create(wire.ProbeRequestSchema, {
      clusterId: this.config.clusterId,
      nodeId: this.config.nodeId,
      epoch: BigInt(this.currentEpoch),
    });
    const deadline = Date.now() + Math.max(1000, this.config.lease.durationMs * 2);
    client.probe(request, new grpc.Metadata(), { deadline }, (err, res) => {
      if (err || !res) return answer(undefined);
      // Believe nothing (above all no epoch) from a node that is not our peer.
      const who = identityRefusal(this.identityRule(), res);
      if (who !== null) {
        this.refusals.report(who, address, "outbound");
        return answer(undefined);
      }
      const role = res.role === wire.NodeRole.PRIMARY ? "primary" : "standby";
      answer({
        nodeId: res.nodeId,
        role,
        epoch: Number(res.epoch),
        replica: res.replica,
        appliedSeq: Number(res.appliedSeq),
      });
    });
  }

  /** probePeer for the node's own (async) role decisions. */
  private askPeer(): Promise<PeerView | undefined> {
    return new Promise((resolve) => this.probePeer(resolve));
  }

  private identityRule(): PeerIdentityRule {
    const c = this.config;
    return { clusterId: c.clusterId, nodeId: c.nodeId, peerName: c.peer.name };
  }

  /** A Probe from our peer is answered; anyone else learns nothing of this node. */
  private answerProbe(
    call: grpc.ServerUnaryCall<wire.ProbeRequest, wire.ProbeResponse>,
    callback: grpc.sendUnaryData<wire.ProbeResponse>,
  ): void {
    const who = identityRefusal(this.identityRule(), call.request);
    if (who !== null) {
      this.refusals.report(who, call.getPeer(), "inbound");
      const status = ERROR_CATALOGUE[who.code].grpcStatus;
      callback({ code: status, details: `${errorName(who.code)}: ${who.message}` });
      return;
    }
    const p = this.role.probe();
    callback(
      null,
      create(wire.ProbeResponseSchema, {
        clusterId: this.config.clusterId,
        nodeId: this.config.nodeId,
        role: p.role === "primary" ? wire.NodeRole.PRIMARY : wire.NodeRole.STANDBY,
        epoch: BigInt(this.currentEpoch),
        replica: p.replica,
        appliedSeq: BigInt(p.appliedSeq),
      }),
    );
  }

  /** Switches to a fresh role of the given kind (the previous one must be stopped). */
  private become(kind: "standalone" | "primary" | "standby", reason: string, role?: Role): void {
    this.record(kind, reason);
    this.log = this.baseLog.child({ role: kind, epoch: this.currentEpoch });
    this.role =
      role ??
      (kind === "standby" ? new StandbyRole(this.roleDeps()) : new PrimaryRole(this.roleDeps()));
    this.role.start();
    this.guestServer?.setServing(kind !== "standby"); // gRPC health (servers.ts)
    this.replicationServer?.setServing(kind === "standby");
    if (kind !== "standby") this.metrics.promotions.inc({ reason });
    if (reason === "lease_expired" || reason === "etcd_key_acquired") this.metrics.failovers.inc();
    this.log.warn({ reason }, `now ${kind}`);
  }

  /** Appends the role change to the history (the previous role is still this.role). */
  private record(to: string, reason: string): void {
    const by = this.askedBy ?? (reason === "switchover" ? "peer" : "automatic");
    this.askedBy = undefined;
    const change: RoleChange = {
      at: new Date().toISOString(),
      node: this.config.nodeId,
      epoch: this.currentEpoch,
      from: this.roleChosen ? this.role.name : "none",
      to,
      reason,
      seq: this.role.probe().appliedSeq,
      by,
    };
    this.roleChosen = true;
    this.lastChange = change;
    try {
      this.history.append(change);
    } catch (e) {
      // The history is for operators: a full disk must not stop a role change.
      this.log.error({ err: (e as Error).message }, "could not append to the role history");
    }
  }

  /** start() has chosen a first role (before: the placeholder standby). */
  private roleChosen = false;

  promote(reason: string, force = false, etcdEpoch?: number): Promise<void> {
    this.transition = this.transition.then(async () => {
      const standby = this.role;
      if (this.stopping || !(standby instanceof StandbyRole)) return;
      const takeover = standby.takeover(force);
      if (!takeover) return;
      const epoch = etcdEpoch ?? promotionEpoch(this.currentEpoch, standby.receiver.epoch);
      this.setEpoch(epoch); // persisted before serving as primary
      await standby.stop("promoted");
      // The new epoch is bound to the logger (a field of the same name would repeat the key).
      this.log = this.baseLog.child({ role: "primary", epoch });
      this.log.warn({ seq: takeover.lastSeq, reason }, "promoting");
      this.become("primary", reason, new PrimaryRole(this.roleDeps(), takeover));
      // Guests that arrived while it promoted waited for this role.
      for (const stream of standby.takeParked()) this.role.serveGuest(stream);
    });
    return this.transition;
  }

  stepDown(theirEpoch: number, reason: string, why = "higher_epoch"): Promise<void> {
    this.transition = this.transition.then(async () => {
      const primary = this.role;
      if (this.stopping || !(primary instanceof PrimaryRole) || primary.name !== "primary") return;
      // After a handover the states are equal: keep ours and stay a replica (no snapshot).
      const kept = primary.handedOver();
      const discarded = discardedOnStepDown(kept !== undefined, primary.soloWork());
      const state = primary.stateOnStepDown(kept !== undefined);
      this.setEpoch(stepDownEpoch(this.currentEpoch, theirEpoch));
      await primary.stop(`stepping down: ${reason}`);
      await this.arbiter?.resign(); // etcd mode: a standby holds no key
      this.metrics.demotions.inc({ reason: kept ? "switchover" : why });
      this.metrics.splitBrainDiscards.inc({ what: "frames" }, discarded.frames);
      this.metrics.splitBrainDiscards.inc(
        { what: "acknowledged_frames" },
        discarded.acknowledgedFrames,
      );
      this.metrics.splitBrainDiscards.inc({ what: "sessions" }, discarded.sessions);
      this.metrics.stateDiscards.inc({ what: "sessions" }, state.sessions);
      this.metrics.stateDiscards.inc({ what: "contexts" }, state.contexts);
      this.metrics.stateDiscards.inc({ what: "vram_bytes" }, state.vramBytes);
      this.metrics.stateDiscards.inc({ what: "entries" }, state.entries);
      this.log = this.baseLog.child({ role: "standby", epoch: this.currentEpoch });
      if (kept) {
        this.log.warn(
          { seq: kept.lastSeq, theirEpoch },
          `stepping down after a handover: ${reason}; keeping the replica`,
        );
        const standby = new StandbyRole(this.roleDeps());
        kept.backend.trackMmio = false;
        standby.driver.adopt(kept.backend, kept.lastSeq);
        this.become("standby", "switchover", standby);
      } else {
        this.log.error(
          { seq: primary.log.lastSeq, theirEpoch, discarded, state },
          `stepping down to standby: ${reason}; discarding this node's state`,
        );
        this.become("standby", why);
      }
      primary.steppedDown();
    });
    return this.transition;
  }

  /**
   * Operator: promote this standby — refused while its primary may still hold its lease (it
   * spoke within a lease: PRIMARY_LEASED) or when the replica is not eligible, unless forced.
   * Forcing past a live primary makes two primaries; the lower epoch then discards its state.
   */
  async manualPromote(force: boolean, caller = "operator"): Promise<Record<string, unknown>> {
    const standby = this.role;
    if (!(standby instanceof StandbyRole)) {
      throw new OpsRefusal(409, "not a standby", ErrorCode.NOT_STANDBY);
    }
    if (!force && !this.arbiter && standby.primaryInSight()) {
      throw new OpsRefusal(
        409,
        `the primary was heard from within the lease (${this.config.lease.durationMs} ms) and may still hold it: not promoting (use switchover on the primary, or force to override)`,
        ErrorCode.PRIMARY_LEASED,
      );
    }
    const why = standby.ineligibleReason();
    if (why && !force) {
      throw new OpsRefusal(
        409,
        `${why}: not promoting (force to override)`,
        ErrorCode.REPLICA_INELIGIBLE,
      );
    }
    let etcdEpoch: number | undefined;
    if (this.arbiter) {
      // etcd mode: even forced, a node serves only holding the leader key.
      const view = await this.arbiter.read();
      if (view.leader) {
        throw new OpsRefusal(409, `the etcd leader key is held by ${view.leader.nodeId}`);
      }
      etcdEpoch = Math.max(view.record?.epoch ?? 0, this.currentEpoch) + 1;
      if (!(await this.arbiter.acquire(view, etcdEpoch, this.config.guest.listen))) {
        throw new OpsRefusal(409, "another node took the etcd leader key first");
      }
    }
    this.askedBy = caller;
    await this.promote(force ? "manual_forced" : "manual", force, etcdEpoch);
    return { role: this.role.name, epoch: this.currentEpoch };
  }

  /** Operator: hand over to the standby (a switchover); forced, step down even without one. */
  async manualDemote(force: boolean, caller = "operator"): Promise<Record<string, unknown>> {
    const primary = this.role;
    if (!(primary instanceof PrimaryRole) || primary.name !== "primary") {
      throw new OpsRefusal(409, "not a primary", ErrorCode.NOT_PRIMARY);
    }
    this.askedBy = caller;
    try {
      return { ...(await primary.switchover()), role: "standby", epoch: this.currentEpoch };
    } catch (e) {
      if (!force) {
        this.askedBy = undefined;
        throw new OpsRefusal(
          409,
          `${(e as Error).message} (force to step down anyway)`,
          ErrorCode.HANDOVER_FAILED,
        );
      }
      this.askedBy = caller;
      await this.stepDown(this.currentEpoch, "demoted by an operator", "manual");
      return { role: this.role.name, epoch: this.currentEpoch, discarded: true };
    }
  }

  /** Operator: planned switchover. */
  async switchover(caller = "operator"): Promise<Record<string, unknown>> {
    const primary = this.role;
    if (!(primary instanceof PrimaryRole) || primary.name !== "primary") {
      throw new OpsRefusal(409, "switchover runs on the primary", ErrorCode.NOT_PRIMARY);
    }
    this.askedBy = caller;
    try {
      const done = await primary.switchover();
      this.metrics.switchovers.inc();
      return { ...done, role: this.role.name, epoch: this.currentEpoch };
    } catch (e) {
      this.askedBy = undefined;
      throw new OpsRefusal(409, (e as Error).message, ErrorCode.HANDOVER_FAILED);
    }
  }

  // ---- maintenance mode (vgpuctl pause / resume) ----

  /** While paused, a standby does not take over on its own (switchover and promote still work). */
  maintenancePaused(): boolean {
    return this.maintenance !== undefined;
  }

  /**
   * Operator: pause automatic failover. On the primary; a standby accepts it only while no
   * primary is in sight (otherwise the primary's heartbeats would undo it at once).
   */
  async pause(caller: string): Promise<Record<string, unknown>> {
    this.refuseOnFollowingStandby("pause");
    this.setMaintenance({ sinceMs: Date.now(), by: caller });
    return this.maintenanceView();
  }

  async resume(caller: string): Promise<Record<string, unknown>> {
    this.refuseOnFollowingStandby("resume");
    if (this.maintenance)
      this.log.warn({ by: caller }, "maintenance mode ended: automatic failover on");
    this.setMaintenance(undefined);
    return this.maintenanceView();
  }

  /** A standby follows its primary's flag, carried on every heartbeat. */
  adoptMaintenance(paused: boolean): void {
    if (paused === this.maintenancePaused()) return;
    this.setMaintenance(paused ? { sinceMs: Date.now(), by: "primary" } : undefined);
  }

  private refuseOnFollowingStandby(what: string): void {
    const standby = this.role;
    if (standby instanceof StandbyRole && standby.primaryInSight()) {
      throw new OpsRefusal(
        409,
        `${what} the primary: it replicates maintenance mode to this standby`,
        ErrorCode.NOT_PRIMARY,
      );
    }
  }

  private setMaintenance(m: Maintenance | undefined): void {
    if (m && this.maintenance) return; // already paused: keep when and by whom
    this.maintenanceStore.write(m);
    this.maintenance = m;
    if (m) this.log.warn({ by: m.by }, "maintenance mode: no automatic failover until resumed");
  }

  private maintenanceView() {
    const m = this.maintenance;
    return m
      ? {
          paused: true,
          since: new Date(m.sinceMs).toISOString(),
          pausedSeconds: Math.max(0, (Date.now() - m.sinceMs) / 1000),
          by: m.by,
          alertAfterSeconds: this.config.ops.maintenanceAlertAfterMs / 1000,
        }
      : { paused: false };
  }

  // ---- reinit ----

  /**
   * Operator: this standby drops its replica and takes a fresh snapshot from its primary.
   * Refused on a primary, and while no primary is in sight (the replica may be the only copy)
   * unless forced.
   */
  async reinit(force: boolean, caller: string): Promise<Record<string, unknown>> {
    const standby = this.role;
    if (!(standby instanceof StandbyRole)) {
      throw new OpsRefusal(409, "reinit runs on a standby", ErrorCode.NOT_STANDBY);
    }
    if (!standby.primaryInSight() && !force) {
      throw new OpsRefusal(
        409,
        "no primary in sight to resync from: this replica may be the only copy (force to drop it anyway)",
        ErrorCode.NO_PRIMARY_IN_SIGHT,
      );
    }
    const dropped = standby.receiver.appliedSeq;
    this.transition = this.transition.then(async () => {
      if (this.stopping || this.role !== standby) return;
      this.log.warn(
        { seq: dropped, by: caller },
        "reinit: dropping the replica for a fresh snapshot",
      );
      await standby.stop("reinit");
      this.askedBy = caller;
      this.become("standby", "reinit");
    });
    await this.transition;
    return { role: this.role.name, epoch: this.currentEpoch, droppedSeq: dropped };
  }

  /** The snapshot the primary is sending, in bytes, rate and ETA. */
  private resync() {
    const snapshot = this.role instanceof PrimaryRole ? this.role.snapshotProgress() : undefined;
    return snapshot && resyncProgress(snapshot, this.clock.monotonicMs());
  }

  adoptEpoch(epoch: number): void {
    if (epoch > this.currentEpoch) {
      this.setEpoch(epoch);
      this.log = this.baseLog.child({ role: this.role.name, epoch });
    }
  }

  /** Drains: refuses new frames, ends streams, closes the servers. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    clearInterval(this.primaryWatch);
    this.log.info("node stopping");
    await this.transition;
    await this.role.stop("node shutting down");
    // A primary gives its key up: its granted standby takes over at once.
    await this.arbiter?.close();
    await this.guestServer?.stop(2000);
    await this.replicationServer?.stop(1000);
    await this.leaseThread?.close();
    await this.ops.close();
    this.log.info("node stopped");
  }

  status(): Record<string, unknown> {
    const c = this.role.counts();
    const { config } = this;
    const last = this.lastChange;
    return {
      nodeId: config.nodeId,
      clusterId: config.clusterId,
      epoch: this.currentEpoch,
      replicationMode: config.role === "standalone" ? null : config.replication.mode,
      tls: {
        replication: config.role !== "standalone" && this.tls !== undefined,
        guest: this.tls ? config.guest.tls : "off",
      },
      maintenance: this.maintenanceView(),
      lastRoleChange: last
        ? {
            ...last,
            ageSeconds: Math.max(0, (Date.now() - Date.parse(last.at)) / 1000),
          }
        : null,
      ...this.role.status(),
      sessions: c.sessions,
      contexts: c.contexts,
      bos: c.bos,
      vram: { usedBytes: c.vramUsed, totalBytes: c.vramTotal },
      leaseThread: this.leaseThread?.counts() ?? null,
      version: VERSION,
      uptimeSeconds: (Date.now() - this.startedMs) / 1000,
    };
  }
}

/** An admin action refused, with the HTTP status to answer and its stable code. */
export class OpsRefusal extends Error {
  readonly status: number;
  /** The catalogue name (errors.ts), e.g. NOT_STANDBY. */
  readonly code: string | undefined;
  constructor(status: number, message: string, code?: ErrorCode) {
    super(message);
    this.status = status;
    this.code = code === undefined ? undefined : errorName(code);
  }
}

/** A listener that failed to bind says which field: "ops.listen 10.0.0.1:9400: …". */
async function bound<T>(field: string, address: string, binding: Promise<T>): Promise<T> {
  try {
    return await binding;
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    throw new Error(`${field} ${address}: cannot bind: ${why}`, { cause: e });
  }
}

export function splitHostPort(address: string): [string, number] {
  const i = address.lastIndexOf(":");
  const host = address.slice(0, i).replace(/^\[(.*)\]$/, "$1");
  return [host, Number(address.slice(i + 1))];
}

/** Test-only: holds the event loop (and this thread) for `ms`, as a long synchronous task would. */
function busyWait(ms: number): Record<string, unknown> {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spin
  }
  return { stalledMs: ms };
}
