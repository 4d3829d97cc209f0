// One vgpud node: the composition around the shipped node driver (@vgpu-ha/common
// NodeDriver over the pure NodeMachine) — the epoch store it persists to before acting, the
// servers (guest port, replication port, ops HTTP), the peer Probe, the lease thread, the role
// history and maintenance mode — and the roles its factory builds (PrimaryRole, StandbyRole).
// The decisions (which role at start, when to promote, step down, adopt an epoch) are the
// machine's: see packages/common/src/core/node-machine.ts and docs/architecture.md.
import {
  type Clock,
  type Config,
  type CurrentRole,
  createMetrics,
  ErrorCode,
  type Logger,
  NodeDriver,
  type NodeMetrics,
  nodeTimers,
  type PeerChannel,
  type PeerView,
  peerChannel,
  resyncProgress,
  type StandbyMessage,
  type Supervisor,
  systemClock,
  type TlsFiles,
  VgpuError,
} from "@vgpu-ha/common";
import type { DeviceFailure } from "@vgpu-ha/gpu-model";
import { GuestGuard, type PullStream } from "@vgpu-ha/primary";
import type { ReplicationCall } from "@vgpu-ha/standby";
import type { FastifyInstance } from "fastify";
import { checkBeforeStart } from "./check/start-checks.js";
import { type DeviceSetup, deviceStatus, setUpDevice } from "./device/device-setup.js";
import { stepDownForDevice } from "./device-failure.js";
import { DeviceWatch } from "./device-watch.js";
import { type GuestRefusalSink, guestRefusalReporter, withStreamLimit } from "./guest-listener.js";
import { EtcdArbiter, type EtcdView } from "./lease/etcd-arbiter.js";
import { etcdPort } from "./lease/etcd-port.js";
import type { LeaseThread } from "./lease/lease-thread.js";
import { startLeaseThread } from "./lease/start-lease-thread.js";
import { bound, busyWait, OpsRefusal, splitHostPort } from "./node-helpers.js";
import { nodeObserver } from "./node-observer.js";
import { manualDemote, manualPromote, reinit, switchover } from "./node-operator.js";
import { buildOpsApp } from "./ops/ops-app.js";
import { answerProbe, type ProbeDeps, probePeer } from "./peer-probe.js";
import { type ReplicationRefusals, replicationRefusals } from "./replication-refusals.js";
import { PrimaryRole, type Takeover } from "./roles/primary-role.js";
import type { GuestStream, Role, RoleDeps } from "./roles/role.js";
import { daemonRoles } from "./roles/role-factory.js";
import { type PullCall, pullStreamOf } from "./roles/snapshot-pull-grpc.js";
import { servePagesSocket } from "./roles/snapshot-pull-serve.js";
import { StandbyRole } from "./roles/standby-role.js";
import { type GrpcServer, guestService, replicationService, startGrpcServer } from "./servers.js";
import { StartingStreams } from "./starting-streams.js";
import { EpochStore } from "./state/epoch-store.js";
import { MaintenanceMode } from "./state/maintenance-mode.js";
import { MaintenanceStore } from "./state/maintenance-store.js";
import { RoleHistory } from "./state/role-history.js";
import { tlsRefusalReporter } from "./tls-listener.js";
import { nodeVersion, VERSION } from "./version.js";

export { OpsRefusal, splitHostPort } from "./node-helpers.js";

export interface NodeAddresses {
  readonly guest: string;
  readonly ops: string;
  readonly replication?: string;
}

type DaemonNodeDriver = NodeDriver<GuestStream, Takeover, EtcdView, PrimaryRole, StandbyRole>;
type Current = CurrentRole<PrimaryRole, StandbyRole>;

export class VgpuNode implements Supervisor {
  readonly config: Config;
  readonly metrics: NodeMetrics;
  readonly baseLog: Logger;
  log: Logger;
  private readonly clock: Clock;
  private readonly store: EpochStore;
  /** The role history; `history.askedBy`: who asked for the change under way. */
  readonly history: RoleHistory;
  /** Maintenance mode (vgpuctl pause): no automatic takeover while set. */
  private readonly maintenance: MaintenanceMode;
  /** lease.mode etcd: the leader key and cluster record. */
  readonly arbiter: EtcdArbiter | undefined;
  /** The node driver: the epoch, the role, the role changes. */
  readonly driver: DaemonNodeDriver;
  /** The epoch read from disk, until the driver starts. */
  private epochRead = 0;
  private readonly ops: FastifyInstance;
  private guestServer: GrpcServer | undefined;
  private replicationServer: GrpcServer | undefined;
  private readonly startedMs = Date.now();
  private stopping = false;
  /** The tls files, read and checked at construction (a ConfigError names the bad field). */
  private readonly tls: TlsFiles | undefined;
  /** How this node dials its peer: mutual TLS naming peer.name, or plaintext. */
  private readonly peer: PeerChannel;
  /** Counts and logs (rate-limited) what the guest port's defences refuse. */
  private readonly guestRefused: GuestRefusalSink;
  /** Peer mode: heartbeats on a thread of their own (lease/lease-thread.ts). */
  private leaseThread: LeaseThread | undefined;
  /** Replication peers that are not ours: counted and logged (rate-limited). */
  private readonly refusals: ReplicationRefusals;
  /** Replication streams that came before the first role was decided, waiting for it. */
  private readonly startingStreams = new StartingStreams<ReplicationCall>();
  /** The device of the role that runs now; its failure makes the node step down and exit. */
  private readonly deviceWatch = new DeviceWatch((failure) => this.leaveForDevice(failure));
  private stoppedForDevice: (failure: DeviceFailure) => void = () => {};
  /** Resolves once the node has stepped down because its device failed (vgpud exits 3). */
  readonly deviceFailure = new Promise<DeviceFailure>((resolve) => {
    this.stoppedForDevice = resolve;
  });
  /** The device (device.backend), set up by start(); the model as configured until then. */
  private device: DeviceSetup | undefined;
  private stoppedForContract: (message: string) => void = () => {};
  /**
   * Resolves once this standby has stopped because its primary's device runs another kernel
   * contract (vgpud exits 2: restarting would not help).
   */
  readonly contractRefusal = new Promise<string>((resolve) => {
    this.stoppedForContract = resolve;
  });

  constructor(config: Config, log: Logger, clock: Clock = systemClock) {
    this.config = config;
    this.baseLog = log;
    this.log = log.child({ role: "starting", epoch: 0 });
    this.clock = clock;
    this.store = new EpochStore(config.stateDir);
    this.history = new RoleHistory(config.stateDir, config.nodeId);
    this.maintenance = new MaintenanceMode(
      new MaintenanceStore(config.stateDir),
      config.ops.maintenanceAlertAfterMs,
      () => this.log,
      () => this.role instanceof StandbyRole && this.role.primaryInSight(),
    );
    this.tls = checkBeforeStart(config);
    this.peer = peerChannel(this.tls, config.peer.name);
    this.arbiter =
      config.lease.mode === "etcd" && config.role !== "standalone"
        ? new EtcdArbiter(config, log.child({ component: "etcd" }), clock)
        : undefined;
    this.metrics = createMetrics({
      role: () => this.role.name,
      epoch: () => this.epoch(),
      sessions: () => this.role.counts().sessions,
      contexts: () => this.role.counts().contexts,
      bos: () => this.role.counts().bos,
      vramUsedBytes: () => this.role.counts().vramUsed,
      vramTotalBytes: () => this.role.counts().vramTotal,
      guestIncompleteBytes: () => this.guestServer?.incompleteBytes() ?? 0,
      replication: () => this.role.replicationGauges(),
      // The lease the primary serves under: the etcd lease's TTL in etcd mode.
      leaseDurationSeconds: () =>
        (config.lease.mode === "etcd" ? config.lease.etcd.ttlMs : config.lease.durationMs) / 1000,
      operator: () => ({
        pausedSinceMs: this.maintenance.sinceMs(),
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
    // Until start() decides, the node is a standby that serves nobody (the driver's placeholder).
    this.driver = this.nodeDriver();
    this.ops = buildOpsApp({
      registry: this.metrics.registry,
      status: () => this.status(),
      history: () => this.history.read(),
      readiness: () =>
        this.stopping ? { ready: false, reason: "shutting down" } : this.role.readiness(),
      digest: async () => {
        const d = await this.role.digest();
        return d ? { nodeId: config.nodeId, seq: d.seq, ...d.digest } : undefined;
      },
      adminToken: config.ops.token,
      admin: {
        verify: async () => {
          if (!this.role.verify) {
            throw new VgpuError(ErrorCode.NOT_PRIMARY, "verify runs on the primary");
          }
          return { ...(await this.role.verify()) };
        },
        ...(config.testing.faultInjection
          ? { corrupt: () => this.role.corrupt?.(), stall: (ms: number) => busyWait(ms) }
          : {}),
        promote: (force, caller) => manualPromote(this, force, caller),
        demote: (force, caller) => manualDemote(this, force, caller),
        switchover: (_force, caller) => switchover(this, caller),
        pause: async (_force, caller) => this.maintenance.pause(caller),
        resume: async (_force, caller) => this.maintenance.resume(caller),
        reinit: (force, caller) => reinit(this, force, caller),
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

  /** The current role (before start() decides: a standby that serves nobody). */
  get role(): Role {
    return this.driver.current.role;
  }

  private nodeDriver(): DaemonNodeDriver {
    const { config } = this;
    const mode = config.role === "standalone" ? "standalone" : this.arbiter ? "etcd" : "peer";
    const configured = config.role === "primary" ? "primary" : "standby";
    const leaseMs = config.lease.durationMs;
    return new NodeDriver(
      { mode, configured, nodeId: config.nodeId, leaseMs },
      {
        persist: (epoch) => this.store.write(epoch), // write + fsync
        probePeer: (done) => this.probePeer(done),
        etcd: this.arbiter && etcdPort(this.arbiter, config.guest.listen),
        roles: daemonRoles(() => this.roleDeps()),
        timers: nodeTimers,
        defer: (fn) => queueMicrotask(fn),
        observer: nodeObserver(this),
        maintenancePaused: () => this.maintenancePaused(),
        adoptMaintenance: (paused) => this.adoptMaintenance(paused),
        deviceFailed: (failure) => this.deviceFailed(failure),
      },
    );
  }

  // ---- the Supervisor the roles see: the driver's ----

  epoch(): number {
    return this.driver === undefined
      ? this.epochRead
      : Math.max(this.driver.epoch(), this.epochRead);
  }

  promote(reason: string, force = false, etcdEpoch?: number): void {
    this.driver.promote(reason, force, etcdEpoch);
  }

  stepDown(theirEpoch: number, reason: string, why = "higher_epoch"): void {
    this.driver.stepDown(theirEpoch, reason, why);
  }

  adoptEpoch(epoch: number): void {
    const before = this.epoch();
    this.driver.adoptEpoch(epoch);
    if (this.epoch() > before) this.log = this.baseLog.child({ role: this.role.name, epoch });
  }

  /** A standby pulls snapshot pages: only a primary serves that (its driver decides). */
  private servePull(call: PullCall): void {
    const { request, stream } = pullStreamOf(call);
    this.serveSnapshotPull(request, stream, call.getPeer());
  }

  /** A pull over PullSnapshot or the pages socket (roles/snapshot-pull-serve.ts). */
  private serveSnapshotPull(request: StandbyMessage | Error, stream: PullStream, remote: string) {
    if (this.role.pullSnapshot === undefined) {
      stream.fail(ErrorCode.NOT_PRIMARY, `this node is ${this.role.name}`);
    } else if (request instanceof Error) {
      stream.fail(ErrorCode.MALFORMED, request.message);
    } else {
      this.role.pullSnapshot(request, stream, remote);
    }
  }

  probePeer(done: (peer: PeerView | undefined) => void): void {
    probePeer(this.probeDeps(), done);
  }

  /** Resolves once the role changes asked for so far have run. */
  settled(): Promise<void> {
    return new Promise((resolve) => this.driver.afterChanges(resolve));
  }

  private probeDeps(): ProbeDeps {
    return {
      config: this.config,
      peer: this.peer,
      refusals: this.refusals,
      epoch: () => this.epoch(),
      role: () => this.role,
    };
  }

  /** gRPC health (servers.ts): the guest port serves on a primary, replication on a standby. */
  setServing(kind: Current["kind"]): void {
    this.guestServer?.setServing(kind !== "standby");
    this.replicationServer?.setServing(kind === "standby");
  }

  /** Appends a role change to the history; `from` is the role being left. */
  record(to: string, reason: string, from: Current): void {
    const fromName = from.kind === "starting" ? "none" : from.role.name;
    const seq = from.role.probe().appliedSeq;
    this.history.record({ epoch: this.epoch(), from: fromName, to, reason, seq }, this.log);
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
      ...(this.tls ? { peerTls: this.tls } : {}),
      guestRefused: this.guestRefused,
      refusals: this.refusals,
      // The roles' heartbeats use it in peer mode; in etcd mode it keeps the etcd lease.
      leaseThread: this.config.lease.mode === "peer" ? this.leaseThread : undefined,
      watchDevice: (progress) => this.deviceWatch.watch(progress),
      ...(this.device ? { device: this.device } : {}),
      contractRefused: (message) => this.contractRefused(message),
    };
  }

  /**
   * Sets up the device (device.backend: device/device-setup.ts); throws DeviceStartError when
   * the webgpu backend cannot start and may not fall back. Announced in the metrics.
   */
  private async setUpDevice(): Promise<DeviceSetup> {
    const device = await setUpDevice(this.config, {
      warn: (fields, message) => this.log.warn(fields, message),
    });
    this.device = device;
    const a = device.adapter;
    this.metrics.deviceInfo.set(
      {
        backend: device.backend,
        kernel_contract: String(device.kernelContract),
        vendor: a?.vendor ?? "",
        architecture: a?.architecture ?? "",
        device: a?.device ?? "",
        driver: a?.driver ?? "",
        webgpu: a?.webgpu ?? "",
      },
      1,
    );
    this.log.info(
      { backend: device.backend, kernelContract: device.kernelContract, adapter: a },
      `device: ${device.description}`,
    );
    return device;
  }

  /** The primary's device runs another kernel contract: this standby stops (vgpud exit 2). */
  private contractRefused(message: string): void {
    if (this.stopping) return;
    this.log.error(
      { detail: message },
      "the primary's device runs another kernel contract: this node stops (exit 2)",
    );
    this.stop().then(
      () => this.stoppedForContract(message),
      () => this.stoppedForContract(message),
    );
  }

  async start(): Promise<NodeAddresses> {
    const { config } = this;
    await this.setUpDevice();
    const epochRead = this.store.read();
    this.epochRead = epochRead;
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
          receiveWindow: config.guest,
          guard: {
            guard: new GuestGuard(config.guest),
            nowMs: () => this.clock.monotonicMs(),
            onRefused: this.guestRefused,
            incomplete: config.guest,
            firstStreamTimeoutMs: config.guest.openTimeoutMs,
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
            stream: (call) => {
              if (!this.startingStreams.park(call)) this.role.acceptReplication(call);
            },
            pullSnapshot: (call) => this.servePull(call),
            probe: (call, callback) => answerProbe(this.probeDeps(), call, callback),
          }),
          {
            receiveWindow: config.replication,
            // The snapshot's pages socket, on this port (roles/snapshot-pull-serve.ts).
            pages: (socket) =>
              servePagesSocket(socket, (request, stream, remote) =>
                this.serveSnapshotPull(request, stream, remote),
              ),
            ...(this.tls
              ? {
                  tls: {
                    files: this.tls,
                    clientCertificates: "required",
                    peerName: config.peer.name,
                    onRefused: this.tlsRefusals("replication"),
                  },
                }
              : {}),
          },
        ),
      );
    }
    this.leaseThread = startLeaseThread(
      config,
      this.replicationServer?.port,
      this.arbiter,
      () => this.clock.monotonicMs(),
      this.baseLog.child({ component: "lease-thread" }),
    );
    // Decides the first role. A primary's stream that came while we probed waited, unread
    // (starting-streams.ts), and goes to the role decided: no snapshot begun and dropped.
    await new Promise<void>((decided) => this.driver.start(epochRead, decided));
    this.startingStreams.release((call) => this.role.acceptReplication(call));
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

  private tlsRefusals(port: "guest" | "replication") {
    return tlsRefusalReporter(
      port,
      { warn: (fields, msg) => this.log.warn(fields, msg) },
      (labels) => this.metrics.tlsRefusals.inc(labels),
    );
  }

  // ---- maintenance mode (vgpuctl pause / resume: state/maintenance-mode.ts) ----

  /** While paused, a standby does not take over on its own (switchover and promote still work). */
  maintenancePaused(): boolean {
    return this.maintenance.paused();
  }

  /** A standby follows its primary's flag, carried on every heartbeat. */
  adoptMaintenance(paused: boolean): void {
    this.maintenance.adopt(paused);
  }

  /**
   * A role says its device failed (the standby's driver, whose takeover then never comes): the
   * same once-only step-down as the device watch's (it may have reported it already).
   */
  deviceFailed(failure: DeviceFailure): void {
    this.deviceWatch.report(failure);
  }

  /** The snapshot the primary is sending, in bytes, rate and ETA. */
  private resync() {
    const snapshot = this.role instanceof PrimaryRole ? this.role.snapshotProgress() : undefined;
    return snapshot && resyncProgress(snapshot, this.clock.monotonicMs());
  }

  /** The device failed: report, name the frame in flight, stop (device-failure.ts). */
  private leaveForDevice(failure: DeviceFailure): void {
    const deps = {
      log: () => this.log,
      metrics: this.metrics,
      role: () => this.role,
      stop: () => this.stop(),
    };
    stepDownForDevice(deps, failure).then(
      () => this.stoppedForDevice(failure),
      () => this.stoppedForDevice(failure),
    );
  }

  /** Drains: refuses new frames, ends streams, closes the servers. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.deviceWatch.close();
    this.log.info("node stopping");
    await this.settled(); // role changes already asked for run first
    this.startingStreams.close();
    await this.driver.stop("node shutting down");
    // A primary gives its key up: its granted standby takes over at once.
    await this.arbiter?.close();
    await this.guestServer?.stop(2000);
    await this.replicationServer?.stop(1000);
    await this.leaseThread?.close();
    this.device?.close?.(); // a device started ahead that no backend took
    await this.ops.close();
    this.log.info("node stopped");
  }

  status(): Record<string, unknown> {
    const c = this.role.counts();
    const { config } = this;
    const last = this.history.last;
    return {
      nodeId: config.nodeId,
      clusterId: config.clusterId,
      epoch: this.epoch(),
      replicationMode: config.role === "standalone" ? null : config.replication.mode,
      tls: {
        replication: config.role !== "standalone" && this.tls !== undefined,
        guest: this.tls ? config.guest.tls : "off",
      },
      maintenance: this.maintenance.view(),
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
      device: {
        ...deviceStatus(this.device, config),
        ...(this.deviceWatch.failure
          ? {
              failed: true,
              reason: this.deviceWatch.failure.reason,
              seq: this.deviceWatch.failure.seq,
            }
          : { failed: false }),
      },
      version: VERSION,
      protocolVersion: nodeVersion(config).protocolVersion,
      kernelContractVersion: nodeVersion(config, this.device).kernelContract,
      uptimeSeconds: (Date.now() - this.startedMs) / 1000,
    };
  }
}
