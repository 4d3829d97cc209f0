// The primary (and standalone) role as the daemon composes it: the shipped PrimaryDriver
// (packages/primary) over the daemon's ports — the gRPC ReplicationClient as the peer link,
// Node timers, the EtcdArbiter as the callback etcd port, the lease thread, the grpc-js
// GuestService as the guest port, pino and prom-client as the observer. The failover
// simulator runs the same driver over its own ports. What stays here is the daemon's alone:
// the idle reaper, operators' paths (close a session, verify, switchover as a Promise) and
// status.
import { randomUUID } from "node:crypto";
import {
  type DiscardedWork,
  encodeStandbyMessage,
  type FaultedFrame,
  type GuestLink,
  grpcGuestLink,
  grpcLink,
  nodeTimers,
  type PrimaryMessage,
  primaryDecoder,
  type ReplicationGauges,
  ReplicationLog,
  type SessionView,
  type StandbyMessage,
  type StateDiscarded,
  stateDiscardedOnStepDown,
  type wire,
} from "@vgpu-ha/common";
import { ErrorCode, VgpuError } from "@vgpu-ha/common/core";
import { Backend, type DeviceFailure, digestOf } from "@vgpu-ha/gpu-model";
import {
  type GuestHooks,
  GuestService,
  IdleSessions,
  listSessions,
  PrimaryDriver,
  type PullStream,
  ReplicationClient,
  type SenderEvent,
  SessionAdmission,
  TenantAuth,
} from "@vgpu-ha/primary";
import type { ReplicationCall } from "@vgpu-ha/standby";
import { etcdPort } from "../lease/etcd-port.js";
import { LeaseThread } from "../lease/lease-thread.js";
import { nodeVersion } from "../version.js";
import { backendOptions, sessionLimits } from "./backend-options.js";
import { primaryObserver } from "./primary-observer.js";
import { primaryStatus } from "./primary-status.js";
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
  /** Frames the old primary's failed device was running: answered DEVICE_FAULT if re-sent. */
  readonly faultedFrames?: readonly FaultedFrame[];
}

export class PrimaryRole implements Role {
  readonly name: "primary" | "standalone";
  readonly deps: RoleDeps;
  readonly driver: PrimaryDriver<GuestLink>;
  readonly guests: GuestService;
  private readonly client: ReplicationClient | undefined;
  private reapTimer: NodeJS.Timeout | undefined;
  /** Which sessions have no stream attached, since when (guest.sessionIdleSeconds). */
  private readonly idle: IdleSessions;
  private nextCheckpoint = 1;
  private readonly checkpointWaiters = new Map<
    number,
    (e: SenderEvent & { kind: "checkpoint" }) => void
  >();

  constructor(deps: RoleDeps, takeover?: Takeover) {
    this.deps = deps;
    const { config, logger, metrics, clock } = deps;
    this.name = config.role === "standalone" ? "standalone" : "primary";
    // A primary streams to its peer; one that does not know its peer's address serves alone.
    const address = this.name === "primary" ? config.peer.replicationAddress : undefined;
    if (address !== undefined) {
      this.client = new ReplicationClient({
        address,
        ...(deps.peerChannel ? { channel: deps.peerChannel } : {}),
        clock,
        logger,
        metrics,
        maxMessageBytes: config.guest.maxMessageBytes,
      });
    }
    this.idle = new IdleSessions(config.guest.sessionIdleSeconds * 1000);
    let guests: GuestService | undefined;
    const r = config.replication;
    const t = config.lease;
    const { leaseThread, arbiter } = deps;
    this.driver = new PrimaryDriver<GuestLink>(
      {
        clusterId: config.clusterId,
        nodeId: config.nodeId,
        peerName: config.peer.name,
        version: nodeVersion(config, deps.device),
        configuredPrimary: config.role === "primary",
        mode: r.mode,
        ...(r.holdStandbyDevice !== undefined ? { holdStandbyDevice: r.holdStandbyDevice } : {}),
        lease: {
          leaseMs: t.durationMs,
          heartbeatMs: t.heartbeatMs,
          driftMarginMs: t.driftMarginMs,
          maxDriftRatio: t.maxDriftRatio,
        },
        etcdPollMs: arbiter ? t.etcd.pollMs : undefined,
        maxLagEntries: r.maxLagEntries,
        maxLagBytes: r.maxLagBytes,
        maxLagMs: r.maxLagMs ?? t.durationMs * 0.4,
        maxApplyLagMs: r.maxApplyLagMs ?? t.durationMs,
        mmio: { mmio: config.mmio.replication, flushBytes: config.mmio.flushBytes },
        flushDelayMs: config.mmio.flushDelayMs,
        sender: {
          maxBatchEntries: r.maxBatchEntries,
          maxBatchBytes: r.maxBatchBytes,
          maxInflightEntries: r.maxInflightEntries,
          maxInflightBytes: r.maxInflightBytes,
          snapshotWindowChunks: r.snapshotWindowChunks,
          retransmitMs: r.retransmitMs,
          retainBytes: r.retainBytes,
        },
        reconnectMs: r.reconnectMs,
        snapshotChunkBytes: r.snapshotChunkBytes,
      },
      {
        clock,
        timers: nodeTimers,
        supervisor: deps.supervisor,
        backend: takeover?.backend ?? new Backend(backendOptions(config, false, deps.device)),
        log: new ReplicationLog(takeover?.lastSeq ?? 0),
        newLineage: () => randomUUID(),
        dialPeer: this.client ? () => this.client!.dial() : undefined,
        guests: (hooks) => {
          guests = this.guestService(hooks);
          return guests;
        },
        etcd: arbiter ? etcdPort(arbiter, config.guest.listen) : undefined,
        leaseThread: leaseThread && {
          newKey: () => LeaseThread.newKey(),
          primary: (key, epoch) => leaseThread.primary(key, epoch),
          none: () => leaseThread.none(),
          setRenewing: (renewing) => leaseThread.setRenewing(renewing),
          ackedSentMs: () => leaseThread.ackedSentMs(),
        },
        observer: primaryObserver({
          logger,
          metrics,
          refusals: deps.refusals,
          peerAddress: address ?? "",
          sender: () => this.driver.sender,
          sequencer: () => this.driver.sequencer,
          stopped: () => this.driver.stopped,
          checkpoint: (e) => this.checkpointWaiters.get(e.requestId)?.(e),
        }),
      },
      takeover !== undefined,
    );
    this.guests = guests!;
    this.driver.sequencer.faultFrames(takeover?.faultedFrames ?? []);
    deps.watchDevice?.(this.driver.backend.progress);
  }

  private guestService(hooks: GuestHooks): GuestService {
    const { config, logger, metrics, clock } = this.deps;
    return new GuestService({
      ...hooks,
      idle: this.idle,
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
      epoch: () => this.deps.supervisor.epoch(),
      maxFramesInFlight: config.guest.maxFramesInFlight,
      maxMessageBytes: config.guest.maxMessageBytes,
      redirect: () => config.peer.guestAddress ?? "",
      clusterId: config.clusterId,
      openTimeoutMs: config.guest.openTimeoutMs,
      ...(this.deps.guestRefused ? { onRefused: this.deps.guestRefused } : {}),
    });
  }

  get backend(): Backend {
    return this.driver.backend;
  }

  /** This node's device failed: name the frame in flight to the standby (device-failure.ts). */
  deviceFailed(failure: DeviceFailure): { frames: readonly FaultedFrame[]; sent: () => boolean } {
    const frames = this.driver.deviceFailed(failure);
    const sender = this.driver.sender;
    // No standby streaming: nobody to tell (a standby that is not a replica cannot promote).
    const sent = () => sender === undefined || sender.fault.sent || sender.state !== "streaming";
    return { frames, sent };
  }

  get log(): ReplicationLog {
    return this.driver.log;
  }

  get sequencer() {
    return this.driver.sequencer;
  }

  get sender() {
    return this.driver.sender;
  }

  start(): void {
    if (this.idle.idleMs > 0) {
      const everyMs = Math.min(
        REAP_CHECK_MAX_MS,
        Math.max(REAP_CHECK_MIN_MS, this.idle.idleMs / 10),
      );
      this.reapTimer = setInterval(() => this.reapIdle(), everyMs);
    }
    this.driver.start();
  }

  async stop(reason: string): Promise<void> {
    clearInterval(this.reapTimer);
    this.driver.stop(reason);
    // A state handed over to the new primary stays this node's replica; else its device ends.
    if (this.driver.handedOver() === undefined) this.backend.close();
  }

  serveGuest(stream: GuestStream): void {
    this.driver.serveGuest(grpcGuestLink(stream));
  }

  /** Guests are served now (not stopping, not handing over or handed off). */
  private serving(): boolean {
    const d = this.driver;
    return !d.stopped && !d.handedOff && !d.handingOver;
  }

  // ---- sessions: the idle reaper and operators ----

  /**
   * Closes the sessions idle past guest.sessionIdleSeconds; not while fenced (peer or etcd
   * lease: the entries would wait, and a standby taking over starts its own idle clocks) nor
   * during a switchover.
   */
  private reapIdle(): void {
    if (!this.serving()) return;
    if (this.view.leaseState() === "fenced") return; // etcd mode: without its etcd lease
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
    if (!this.serving()) {
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
    while (!applied() && !this.driver.stopped && clock.monotonicMs() < deadline) {
      await new Promise((r) => setTimeout(r, 5));
    }
    return { id, tenant: ended.tenant, seq: ended.seq, replicated: applied() };
  }

  /** What stepping down now would throw away. */
  soloWork(): DiscardedWork {
    return this.driver.soloWork();
  }

  /** The whole state a step-down without a handover would throw away. */
  stateOnStepDown(handedOver: boolean): StateDiscarded {
    const c = this.counts();
    const held = { sessions: c.sessions, contexts: c.contexts, vramBytes: c.vramUsed };
    const confirmed = this.driver.machine?.confirmedSeq ?? 0;
    return stateDiscardedOnStepDown(handedOver, held, this.log.lastSeq, confirmed);
  }

  /** Another primary dials us: the driver decides on its hello. */
  acceptReplication(call: ReplicationCall): void {
    const link = grpcLink<StandbyMessage, PrimaryMessage, wire.StandbyMessage, wire.PrimaryMessage>(
      call,
      encodeStandbyMessage,
      primaryDecoder(),
    );
    this.driver.acceptReplication(link, call.getPeer());
  }

  /** A standby pulls snapshot pages: the driver serves or refuses it. */
  pullSnapshot(request: StandbyMessage, stream: PullStream, remote: string): void {
    this.driver.pullSnapshot(stream, request, remote);
  }

  probe() {
    return { role: "primary" as const, replica: false, appliedSeq: this.log.lastSeq };
  }

  /**
   * Planned switchover (PrimaryDriver.switchover) as a Promise for the operator. Resolves when
   * this node has stepped down.
   */
  switchover(timeoutMs = 10_000): Promise<{ seq: number; digest: string; pauseMs: number }> {
    return new Promise((resolve, reject) => {
      const refusal = this.driver.switchover(timeoutMs, (outcome) => {
        if (outcome.ok) {
          resolve({ seq: outcome.seq, digest: outcome.digest, pauseMs: outcome.pauseMs });
        } else if (outcome.code !== undefined) reject(new VgpuError(outcome.code, outcome.why));
        else reject(new Error(outcome.why));
      });
      if (refusal !== undefined) reject(new VgpuError(refusal.code, refusal.message));
    });
  }

  /** The state to keep when stepping down after a handover (equal to the new primary's). */
  handedOver(): Takeover | undefined {
    return this.driver.handedOver();
  }

  /** Called by the node once it has stepped down. */
  steppedDown(): void {
    this.driver.steppedDown();
  }

  async verify(): Promise<VerifyResult> {
    const sender = this.sender;
    if (!sender?.inSync) throw new VgpuError(ErrorCode.NO_STANDBY_IN_SYNC);
    const requestId = this.nextCheckpoint++;
    // The digest is taken once the device has done everything before the checkpoint; it
    // follows the entry to the standby (a late result) and comes before the standby's answer.
    let digest = "";
    const seq = this.sequencer.checkpoint(requestId, (d) => {
      digest = d;
      this.driver.pump();
    });
    this.driver.pump();
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

  async digest() {
    const seq = this.log.lastSeq;
    return { seq, digest: await digestOf(this.backend) };
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

  private get view() {
    return primaryStatus({
      name: this.name,
      config: this.deps.config,
      clock: this.deps.clock,
      arbiter: this.deps.arbiter,
      driver: this.driver,
      connected: () => this.driver.connected,
    });
  }

  replicationGauges(): ReplicationGauges {
    return this.view.replicationGauges();
  }

  readiness() {
    return this.view.readiness();
  }

  status(): Record<string, unknown> {
    return this.view.status();
  }
}
