// The primary (and standalone) role's driver, generic over its ports (TigerBeetle's
// ReplicaType(…, MessageBus, Storage, Time)): the daemon runs it over gRPC, Node timers, the
// etcd client, pino and prom-client (daemon/src/roles/primary-role.ts); the failover simulator
// over its simulated processes, network and etcd. Serves guests through the sequencer; with a
// peer, streams the log to the standby. The decisions are the PrimaryMachine's (core/); this
// file owns the timers, the link, the guests and etcd requests, and carries out its actions.
// Standalone (no peer to dial): no machine, nothing to wait for.
import {
  type Clock,
  type DiscardedWork,
  ErrorCode,
  type FaultedFrame,
  holdsStandbyDevice,
  type LeaseTerms,
  type Link,
  NOTHING_DISCARDED,
  type NodeVersion,
  type PrimaryMessage,
  type ReplicationLog,
  type ReplicationMode,
  type StandbyMessage,
  snapshotTraceOn,
  type TimerHandle,
  type Timers,
  traceSnapshotChunk,
} from "@vgpu-ha/common";
import {
  type Backend,
  type DeviceFailure,
  digestWhenDone,
  SnapshotSource,
} from "@vgpu-ha/gpu-model";
import { acceptReplication } from "./accept-replication.js";
import { framesAt } from "./core/device-fault-notice.js";
import type { EtcdReadView, EtcdRequest } from "./core/primary-etcd.js";
import {
  type PrimaryAction,
  type PrimaryFacts,
  type PrimaryLease,
  PrimaryMachine,
} from "./core/primary-machine.js";
import { Sender, type SenderOptions } from "./core/sender.js";
import { Sequencer, type SequencerOptions } from "./core/sequencer.js";
import { type PeerLink, PeerLinkShell } from "./peer-link.js";
import type {
  EtcdPort,
  GuestPort,
  GuestPortFactory,
  LeaseThreadPort,
  PrimaryObserver,
  PrimarySupervisor,
} from "./ports.js";
import { type PullStream, SnapshotOutlet } from "./snapshot-outlet.js";
import { Switchover, type SwitchoverOutcome, type SwitchoverRefusal } from "./switchover.js";

export interface PrimaryDriverOptions {
  readonly clusterId: string;
  readonly nodeId: string;
  readonly peerName: string;
  /** What this node runs, announced in its hellos and required of its peer's (peer-version.ts). */
  readonly version?: NodeVersion;
  /** This node starts the pair when no state survives (etcd: it may take the key first). */
  readonly configuredPrimary: boolean;
  readonly mode: ReplicationMode;
  /** replication.holdStandbyDevice (absent: by the mode, core/release.ts holdsStandbyDevice). */
  readonly holdStandbyDevice?: boolean;
  readonly lease: LeaseTerms;
  /** etcd mode: how often a node without the key tries to take it back; undefined: peer mode. */
  readonly etcdPollMs: number | undefined;
  readonly maxLagEntries: number;
  readonly maxLagBytes: number;
  readonly maxLagMs: number;
  /** Guests wait while entries wait longer than this for the standby's device (applied). */
  readonly maxApplyLagMs: number;
  readonly mmio: SequencerOptions;
  readonly flushDelayMs: number;
  readonly sender: Omit<SenderOptions, "clusterId" | "nodeId" | "peerName" | "heartbeatMs">;
  readonly reconnectMs: number;
  readonly snapshotChunkBytes: number;
}

export interface PrimaryPorts<S> {
  readonly clock: Clock;
  readonly timers: Timers;
  readonly supervisor: PrimarySupervisor;
  /** The state the role serves (a standby's at promotion, or a fresh one). */
  readonly backend: Backend;
  readonly log: ReplicationLog;
  /** Opens a replication stream to the peer; undefined: serve alone (standalone). */
  readonly dialPeer: (() => PeerLink) | undefined;
  readonly guests: GuestPortFactory<S>;
  readonly etcd?: EtcdPort | undefined;
  readonly leaseThread?: LeaseThreadPort | undefined;
  readonly observer: PrimaryObserver;
  /**
   * A new random lineage id (core/lineage.ts), for a history this role starts: a backend that
   * has none (a fresh one) gets it; a standby's replica keeps its own (the history goes on).
   */
  readonly newLineage: () => string;
}

export class PrimaryDriver<S> {
  private readonly options: PrimaryDriverOptions;
  private readonly ports: PrimaryPorts<S>;
  readonly backend: Backend;
  readonly log: ReplicationLog;
  readonly sequencer: Sequencer;
  readonly guests: GuestPort<S>;
  readonly sender: Sender | undefined;
  /** The role's decisions (undefined standalone). */
  readonly machine: PrimaryMachine | undefined;
  private readonly link: PeerLinkShell | undefined;
  /** A standby's snapshot pull (undefined standalone). */
  private readonly outlet: SnapshotOutlet | undefined;
  private readonly switchovers: Switchover | undefined;
  private readonly promoted: boolean;
  private flushTimer: TimerHandle | undefined;
  private leaseTimer: TimerHandle | undefined;
  private stopping = false;
  /** Snapshot ids grow across restarts too (a standby ignores chunk 0 of an older id). */
  private nextSnapshotId: number;
  /** etcd mode: the last read, which an acquisition is conditioned on. */
  private etcdView: EtcdReadView | undefined;
  private stopDeviceWatch: () => void = () => {};

  constructor(options: PrimaryDriverOptions, ports: PrimaryPorts<S>, promoted: boolean) {
    this.options = options;
    this.ports = ports;
    this.promoted = promoted;
    this.backend = ports.backend;
    if (this.backend.lineage === "") this.backend.lineage = ports.newLineage();
    this.log = ports.log;
    this.nextSnapshotId = Math.floor(ports.clock.wallMs() * 1000);
    // Standalone, every entry is dropped once its guest message is served (afterGuestMessage).
    const mmio = { ...options.mmio, logKeepsEntries: ports.dialPeer !== undefined };
    this.sequencer = new Sequencer(this.backend, this.log, mmio, () => ports.clock.monotonicMs());
    this.backend.trackMmio = ports.dialPeer !== undefined && options.mmio.mmio === "per-page";
    if (ports.dialPeer) {
      const o = options;
      this.sender = new Sender(
        {
          ...o.sender,
          clusterId: o.clusterId,
          nodeId: o.nodeId,
          peerName: o.peerName,
          version: o.version,
          heartbeatMs: o.lease.heartbeatMs,
          holdStandby: holdsStandbyDevice(o.mode, o.holdStandbyDevice),
          deviceDoneSeq: () => this.deviceSeq(),
        },
        this.log,
        () => this.startSnapshot(),
        ports.supervisor.epoch(),
      );
      this.sender.lineage = this.backend.lineage;
      if (ports.leaseThread) {
        // Our lease channel's key, sent in every hello over the (mutually authenticated, when
        // tls is on) replication stream: the standby's lease thread takes only what it signs.
        const key = ports.leaseThread.newKey();
        this.sender.leaseKey = key;
        ports.leaseThread.primary(key, ports.supervisor.epoch());
      }
      this.machine = new PrimaryMachine(
        {
          identity: {
            clusterId: o.clusterId,
            nodeId: o.nodeId,
            peerName: o.peerName,
            version: o.version,
          },
          mode: o.mode,
          lease: o.lease,
          etcd:
            ports.etcd && o.etcdPollMs !== undefined
              ? { configuredPrimary: o.configuredPrimary, pollMs: o.etcdPollMs }
              : undefined,
          maxLagEntries: o.maxLagEntries,
          maxLagBytes: o.maxLagBytes,
          maxLagMs: o.maxLagMs,
          maxApplyLagMs: o.maxApplyLagMs,
        },
        this.sender,
        this.log,
      );
      this.outlet = new SnapshotOutlet(this.sender);
      this.link = new PeerLinkShell({
        outlet: this.outlet,
        sender: this.sender,
        log: this.log,
        clock: ports.clock,
        timers: ports.timers,
        dial: ports.dialPeer,
        reconnectMs: o.reconnectMs,
        retainBytes: o.sender.retainBytes,
        onProgress: () => this.onProgress(),
        onEvent: (e) => {
          ports.observer.senderEvent(e, this.log.lastSeq);
          this.apply(this.machine!.senderEvent(e, ports.clock.monotonicMs()));
        },
      });
      this.switchovers = new Switchover({
        clock: ports.clock,
        timers: ports.timers,
        machine: this.machine,
        guests: () => this.guests,
        sequencer: this.sequencer,
        pumpNow: () => this.link!.pumpNow(),
        observer: ports.observer,
      });
    }
    this.guests = ports.guests({
      sequencer: this.sequencer,
      serving: () => !this.stopping && !this.machine?.handedOff,
      replicatedSeq: () => this.releasable(),
      afterApply: () => this.afterGuestMessage(),
      // The lag bound holds per turn, as before afterApply was deferred: a poll of the sockets
      // can bring several messages, each served at once on arrival.
      served: () => {
        if (this.link) this.applyBackPressure();
      },
    });
  }

  start(): void {
    const { machine, link, ports } = this;
    // The device completed work: late results may go out, replies may be released (#14).
    this.stopDeviceWatch = this.backend.progress.onProgress(() => this.afterDevice());
    if (!machine || !link) return;
    machine.start(this.facts(), this.promoted);
    if (ports.etcd) ports.etcd.onLost = () => this.tick();
    link.start();
    const tickMs = Math.max(5, Math.floor(this.options.lease.heartbeatMs / 2));
    this.leaseTimer = ports.timers.setInterval(tickMs, () => this.tick());
  }

  /** Ends guest streams (NOT_PRIMARY), the link and timers; answers still to come are ignored. */
  stop(reason: string): void {
    this.stopping = true;
    this.stopDeviceWatch();
    this.machine?.stop();
    if (this.sender) this.ports.leaseThread?.none();
    this.ports.timers.clear(this.flushTimer);
    this.ports.timers.clear(this.leaseTimer);
    this.switchovers?.stop();
    this.guests.endAll(reason);
    this.link?.stop();
    this.sender?.disconnected();
  }

  get stopped(): boolean {
    return this.stopping;
  }

  /** The lease state (standalone: alone). */
  get lease(): PrimaryLease | "alone" {
    return this.machine?.lease ?? "alone";
  }

  /** The lease as a release judged now would see it (etcd: the etcd lease). */
  effectiveLease(): PrimaryLease | "alone" {
    return this.machine?.releaseView(this.facts()).lease ?? "alone";
  }

  get connected(): boolean {
    return this.link?.connected ?? false;
  }

  get handingOver(): boolean {
    return this.machine?.switchingOver ?? false;
  }

  get handedOff(): boolean {
    return this.machine?.handedOff ?? false;
  }

  /** What the machine reads now. */
  facts(): PrimaryFacts {
    const { clock, leaseThread, etcd } = this.ports;
    return {
      nowMs: clock.monotonicMs(),
      releasedSeq: this.guests.releasedSeq,
      applied: this.guests.applied,
      leaseThreadAckedMs: leaseThread?.ackedSentMs(),
      etcd: etcd ? { holding: etcd.holding, leaseEndMs: etcd.leaseEndMs() } : undefined,
      deviceSeq: this.deviceSeq(),
    };
  }

  /**
   * The highest seq whose device work is complete. A pending page batch's store frames carry
   * the seq it will get (lastSeq + 1), so ask up to there: with nothing outstanding, that.
   */
  private deviceSeq(): number {
    return this.backend.progress.doneSeq(this.log.lastSeq + 1);
  }

  /** Which replies may go out now (GuestHooks.replicatedSeq); undefined: all. */
  releasable(): number | undefined {
    if (this.machine) return this.machine.releasable(this.facts());
    const device = this.deviceSeq();
    return device > this.log.lastSeq ? undefined : device;
  }

  /** Device progress: send what it produced (late results), release what it completed. */
  private afterDevice(): void {
    if (this.stopping) return;
    this.link?.pump();
    this.guests.release();
  }

  /** Moves between leased, fenced and degraded; called on a timer and on every ack. */
  private tick(): void {
    const { machine, sender } = this;
    if (!machine || !sender || this.stopping) return;
    // The lease thread renews only while our stream to the peer is up (else the old rules
    // apply: fenced, then degraded) — and only while this loop turns (its watchdog).
    this.ports.leaseThread?.setRenewing(
      sender.state === "snapshot" || sender.state === "streaming",
    );
    sender.maintenancePaused = this.ports.supervisor.maintenancePaused?.() ?? false;
    this.apply(machine.tick(this.facts()));
  }

  private onProgress(): void {
    if (this.stopping) return;
    this.apply(this.machine!.progress(this.facts()));
    this.applyBackPressure();
  }

  /** Holds guests back while the standby lags beyond the configured bounds. */
  private applyBackPressure(): void {
    const paused = this.machine!.backPressure(this.ports.clock.monotonicMs());
    if (paused !== undefined) this.guests.setPaused(paused);
  }

  /** Carries the machine's actions out, in order. */
  private apply(actions: readonly PrimaryAction[]): void {
    for (const a of actions) {
      switch (a.kind) {
        case "notice":
          this.ports.observer.notice(a.notice, this.log.lastSeq);
          break;
        case "release":
          this.guests.release();
          break;
        case "etcd":
          this.etcdRequest(a.request);
          break;
        case "stepDown":
          this.ports.supervisor.stepDown(a.epoch, a.reason);
          break;
        case "adoptEpoch":
          this.ports.supervisor.adoptEpoch(a.epoch);
          break;
        case "endGuests":
          this.guests.endAll(a.reason);
          break;
      }
    }
  }

  /** Asks etcd; the answer goes back to the machine (which ignores it once stopped). */
  private etcdRequest(request: EtcdRequest): void {
    const etcd = this.ports.etcd!;
    const machine = this.machine!;
    const failed = (error: Error | undefined) => {
      if (error) this.ports.observer.etcdFailed(error);
    };
    switch (request.kind) {
      case "read":
        etcd.read((error, view) => {
          failed(error);
          this.etcdView = view;
          this.apply(machine.etcdRead(error ? undefined : view));
        });
        break;
      case "acquire":
        etcd.acquire(this.etcdView!, request.epoch, (error, acquired) => {
          failed(error);
          this.apply(machine.etcdAnswered(request, !error && acquired));
        });
        break;
      case "setReplica":
        etcd.setReplica(request.epoch, request.replica, (error, written) => {
          failed(error);
          this.apply(machine.etcdAnswered(request, !error && written));
        });
        break;
      case "resign":
        etcd.resign();
        break;
    }
  }

  // ---- guests ----

  /** After each guest message: cut MMIO soon, send, and drop what no one needs. */
  private afterGuestMessage(): void {
    if (this.sequencer.mmioPending && this.flushTimer === undefined) {
      this.flushTimer = this.ports.timers.setTimeout(this.options.flushDelayMs, () => {
        this.flushTimer = undefined;
        this.sequencer.flushMmio();
        this.afterGuestMessage();
      });
    }
    this.ports.observer.guestMessage();
    if (this.link) {
      this.link.pump();
      this.applyBackPressure();
    } else {
      this.log.release(this.log.lastSeq, 0);
    }
    this.guests.release();
  }

  /** Serves one guest stream. */
  serveGuest(stream: S): void {
    this.guests.serve(stream);
  }

  /** Sends what the Sender wants to send now (after an operator's entry, say). */
  pump(): void {
    this.afterGuestMessage();
  }

  // ---- another primary dials us ----

  /**
   * A replication stream opened by another node: its first message decides. The lower epoch
   * steps down; a stranger (another cluster or node) is refused before its epoch is read.
   */
  acceptReplication(link: Link<StandbyMessage, PrimaryMessage>, remote: string): void {
    const { supervisor, observer, timers } = this.ports;
    acceptReplication(link, remote, {
      self: this.options,
      machine: this.machine,
      supervisor,
      observer,
      timers,
    });
  }

  /** A standby pulls a snapshot's pages (PullSnapshot): served from the Sender, or refused. */
  pullSnapshot(stream: PullStream, request: StandbyMessage, remote: string): void {
    if (this.outlet === undefined || this.stopping) {
      stream.fail(ErrorCode.NOT_PRIMARY, "this node streams to no standby");
      return;
    }
    traceSnapshotChunk("p.pullOpened", request.kind === "hello" ? request.snapshotChunk : -1);
    const decision = this.outlet.open(stream, request);
    this.ports.observer.snapshotPull?.(decision, remote);
  }

  // ---- replication plumbing ----

  private startSnapshot(): SnapshotSource {
    traceSnapshotChunk("p.begun", 0);
    this.sequencer.flushMmio();
    const source = new SnapshotSource(
      this.backend,
      this.nextSnapshotId++,
      this.log.lastSeq,
      this.options.snapshotChunkBytes,
    );
    // Chunks are read by the device: one that arrives later is sent at once.
    source.onChunkReady = () => {
      if (!this.stopping) this.link?.pumpNow();
    };
    if (snapshotTraceOn) source.trace = traceSnapshotChunk;
    this.ports.observer.snapshotStarted(source, this.backend);
    return source;
  }

  // ---- planned switchover ----

  /**
   * Planned switchover: stop taking frames, wait until the standby has applied everything and
   * every reply is out, then hand over with the state digest. The standby takes over at once
   * (epoch + 1); this node then becomes its standby with the same state (no snapshot).
   * Returns why it was refused (a catalogue code), or undefined; `settled` is told how it ended.
   */
  switchover(
    timeoutMs: number,
    settled: (outcome: SwitchoverOutcome) => void,
  ): SwitchoverRefusal | undefined {
    if (!this.switchovers) {
      return { code: ErrorCode.HANDOVER_FAILED, message: "no standby in sync to hand over to" };
    }
    return this.switchovers.begin(timeoutMs, settled);
  }

  /** The state to keep when stepping down after a handover (equal to the new primary's). */
  handedOver(): { backend: Backend; lastSeq: number } | undefined {
    const lastSeq = this.switchovers?.handedOverAt();
    if (lastSeq === undefined || lastSeq !== this.log.lastSeq) return undefined;
    return { backend: this.backend, lastSeq };
  }

  /** Called by the node once it has stepped down. */
  steppedDown(): void {
    this.switchovers?.steppedDown();
  }

  /** What stepping down now would throw away (its solo work). */
  soloWork(): DiscardedWork {
    return this.machine?.soloWork(this.facts()) ?? NOTHING_DISCARDED;
  }

  /**
   * This node's device failed (progress.onFailure): names to the standby the frame whose device
   * work was running, so the next primary never runs it again. The node then steps down.
   */
  deviceFailed(failure: DeviceFailure): readonly FaultedFrame[] {
    const { progress } = this.backend;
    const running = failure.seq > 0 ? failure.seq : progress.doneSeq(this.log.lastSeq) + 1;
    const frames = framesAt(this.log, running);
    this.sender?.fault.raise(frames, failure.reason);
    this.pump();
    return frames;
  }

  /**
   * The state digest as it is now (for a switchover's or operator's comparison), once the
   * device has hashed the buffers at this point of its order (maybe before returning).
   */
  digest(callback: (state: string) => void): void {
    digestWhenDone(this.backend, (d) => callback(d.state));
  }
}
