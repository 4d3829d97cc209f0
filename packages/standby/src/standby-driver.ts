// The standby role's driver: the Receiver and the StandbyMachine (core/) over ports — timers,
// the node (Supervisor), etcd, the guest port, an observer — with the replication stream on a
// StandbyLink. The daemon (packages/daemon/src/roles/standby-role.ts) and the failover
// simulator (test/sim/failover) both run this class, each with its own ports.
import type {
  FaultedFrame,
  LeaseTerms,
  Link,
  PrimaryMessage,
  StandbyMessage,
  Supervisor,
  TimerHandle,
  Timers,
} from "@vgpu-ha/common";
import { invariant } from "@vgpu-ha/common";
import { Backend, type DeviceFailure } from "@vgpu-ha/gpu-model";
import { Receiver, type ReceiverOptions } from "./core/receiver.js";
import {
  type EtcdReading,
  type StandbyAction,
  type StandbyFacts,
  StandbyMachine,
} from "./core/standby-machine.js";
import type { LinkLogger, StandbyEtcd, StandbyGuests, StandbyObserver } from "./ports.js";
import { SnapshotPuller, type SnapshotPullPort } from "./snapshot-puller.js";
import { StandbyLink, type StreamRefusal } from "./standby-link.js";

export interface StandbyDriverDeps<G, V extends EtcdReading> {
  readonly receiver: ReceiverOptions;
  /** The only node that may be this standby's primary (config peer.name). */
  readonly peerName: string;
  /** Where guests reach the primary (the redirect a refused guest is given). */
  readonly peerGuestAddress: string;
  /** This node is configured `role: primary`. */
  readonly configuredPrimary: boolean;
  readonly lease: LeaseTerms;
  /** etcd mode: the leader key and how often it is read; undefined in peer mode. */
  readonly etcd: { readonly port: StandbyEtcd<V>; readonly pollMs: number } | undefined;
  /** Monotonic milliseconds. */
  readonly now: () => number;
  readonly timers: Timers;
  readonly supervisor: Supervisor;
  readonly guests: StandbyGuests<G>;
  readonly logger: LinkLogger;
  readonly observer: StandbyObserver;
  /** When the primary was last heard on a lease channel of its own (undefined: none). */
  readonly channelHeardMs?: () => number | undefined;
  /** A stream refused before it became the live one. */
  readonly onRefused?: (refusal: StreamRefusal, remote: string) => void;
  /**
   * How to pull a snapshot's pages from the primary (snapshot-puller.ts); absent: they come on
   * the replication stream (a standby that does not know its primary's replication address).
   */
  readonly pullPort?: SnapshotPullPort;
}

/** The replica a promoted standby hands to the primary role. */
export interface StandbyTakeover {
  readonly backend: Backend;
  readonly lastSeq: number;
  /** Frames the old primary's failed device was running: never run again (DEVICE_FAULT). */
  readonly faultedFrames?: readonly FaultedFrame[];
}

export class StandbyDriver<G, V extends EtcdReading = EtcdReading> {
  readonly receiver: Receiver;
  readonly link: StandbyLink;
  readonly machine: StandbyMachine;
  /** Pulls snapshot pages from the primary (undefined: they come on the stream). */
  readonly puller: SnapshotPuller | undefined;
  private readonly deps: StandbyDriverDeps<G, V>;
  private leaseTimer: TimerHandle | undefined;
  private parkTimer: TimerHandle | undefined;
  /** Guests that arrived during a promotion, waiting for the new primary role. */
  private parked: G[] = [];
  /** etcd mode: the view the acquisition is conditioned on. */
  private etcdView: V | undefined;
  /** The replica as of the last message (a completed snapshot replaces it). */
  private replica: Backend | undefined;
  /** Stops following the replica's device (followDevice). */
  private unfollowDevice: (() => void) | undefined;

  constructor(deps: StandbyDriverDeps<G, V>) {
    this.deps = deps;
    const pullsSnapshots = deps.pullPort !== undefined;
    this.receiver = new Receiver({ ...deps.receiver, pullsSnapshots }, deps.supervisor.epoch());
    this.machine = new StandbyMachine({
      nodeId: deps.receiver.nodeId,
      configuredPrimary: deps.configuredPrimary,
      lease: deps.lease,
      etcdPollMs: deps.etcd?.pollMs,
    });
    this.link = new StandbyLink({
      receiver: this.receiver,
      logger: deps.logger,
      now: deps.now,
      // Only peer.name of this cluster may be our primary (under tls its certificate says so too).
      identity: {
        clusterId: deps.receiver.clusterId,
        nodeId: deps.receiver.nodeId,
        peerName: deps.peerName,
        ...(deps.receiver.version ? { version: deps.receiver.version } : {}),
      },
      ...(deps.onRefused ? { onRefused: deps.onRefused } : {}),
      muted: () => this.machine.holdingTakeover,
      heardWhileMuted: () => this.run(this.machine.primaryHeard()),
      beforeStep: (m) => this.puller?.beforeStep(m),
      onStep: (m) => {
        deps.observer.stepped?.(m);
        this.afterStep();
        this.puller?.check();
      },
    });
    this.puller = deps.pullPort
      ? new SnapshotPuller({
          port: deps.pullPort,
          receiver: this.receiver,
          now: deps.now,
          deliver: (m) => this.link.pulled(m),
          logger: deps.logger,
        })
      : undefined;
  }

  start(): void {
    const tickMs = Math.max(5, Math.floor(this.deps.lease.heartbeatMs / 2));
    this.leaseTimer = this.deps.timers.setInterval(tickMs, () => this.watchLease());
  }

  stop(reason: string): void {
    const refuseParked = this.machine.stop(reason);
    this.deps.timers.clear(this.leaseTimer);
    this.deps.timers.clear(this.parkTimer);
    this.unfollowDevice?.();
    // Parked guests go to the new primary role when promoted; otherwise they are refused.
    if (refuseParked) for (const s of this.parked.splice(0)) this.refuse(s);
    this.puller?.stop();
    this.link.close(reason);
    this.receiver.abandonSnapshot();
  }

  acceptLink(link: Link<StandbyMessage, PrimaryMessage>, remote?: string): void {
    // The node's persisted epoch is the least this standby answers at: the starting node's
    // standby is built before the epoch file is read, and acknowledged a primary of an older
    // epoch, whose lease that renewed (failover seed 23365).
    this.receiver.raiseEpoch(this.deps.supervisor.epoch());
    this.link.acceptLink(link, remote);
  }

  serveGuest(stream: G): void {
    if (this.machine.guestArrives() === "refuse") {
      this.refuse(stream);
      return;
    }
    this.deps.guests.pause(stream);
    this.parked.push(stream);
  }

  /** The guest streams parked during a promotion, for the new primary role to serve. */
  takeParked(): G[] {
    this.deps.timers.clear(this.parkTimer);
    return this.parked.splice(0);
  }

  /** Keeps a replica (a primary that stepped down after a handover stays its peer's replica). */
  adopt(backend: Backend, lastSeq: number): void {
    this.receiver.adopt(backend, lastSeq);
    this.replica = backend;
    this.followDevice(backend);
  }

  /**
   * When the primary was last heard from: on its replication stream, or on the lease channel
   * (its lease thread's heartbeats, which a busy main loop on either side does not delay).
   */
  lastHeardMs(): number | undefined {
    const stream = this.link.lastMessageMs;
    const channel = this.deps.channelHeardMs?.();
    if (channel === undefined) return stream;
    return stream === undefined ? channel : Math.max(stream, channel);
  }

  /** A primary has spoken to this standby within the lease. */
  primaryInSight(): boolean {
    const last = this.lastHeardMs();
    return last !== undefined && this.deps.now() - last < this.deps.lease.leaseMs;
  }

  /** A takeover is decided and waits for the device to apply the received backlog. */
  get takingOver(): boolean {
    return this.machine.holdingTakeover;
  }

  /** Entries received and not yet applied by the device (held ones included). */
  get backlog(): number {
    return this.receiver.backlog;
  }

  /**
   * This standby holds a replica (granted or not) with something in it — during a snapshot,
   * the one being replaced, intact until the snapshot completes.
   */
  get holdsReplica(): boolean {
    return this.heldSeq > 0;
  }

  /**
   * The last seq the replica holds (0: none): everything received, whether its device has
   * applied it yet or not — an installed snapshot the device is still writing holds its seq,
   * and a takeover waits for the device anyway. Not the applied seq: a peer told "nothing"
   * while the device catches up starts the pair afresh and the replica is thrown away
   * (failover seed 6495).
   */
  get heldSeq(): number {
    const r = this.receiver;
    const whole = r.state === "replica" || r.state === "snapshot";
    return whole && r.backend !== undefined ? r.receivedSeq : 0;
  }

  /**
   * The replica, handed to the primary role at promotion; undefined when not eligible or its
   * device failed. Forced (an operator's choice, or the last state left), whatever state there
   * is, or an empty one.
   */
  takeover(force = false): StandbyTakeover | undefined {
    // A failed device's replica is never served, forced or not: it lost what was queued on it
    // (the node is stepping down: Supervisor.deviceFailed).
    if (this.machine.replicaDeviceFailed) return undefined;
    // Everything received: the promotion waited for the device to apply it (backlogApplied).
    this.releaseHeld(); // none left after a takeover that waited for the backlog
    const { backend, receivedSeq, submittedSeq, faultedFrames } = this.receiver;
    if (backend && (this.receiver.eligible || force)) {
      // What the backend holds: all received, unless a divergence dropped what was held.
      return { backend, lastSeq: submittedSeq, faultedFrames: [...faultedFrames] };
    }
    if (!force) return undefined;
    return { backend: new Backend(this.deps.receiver.backendOptions), lastSeq: receivedSeq };
  }

  /** The highest epoch the receiver has seen (a promotion goes above it). */
  seenEpoch(): number {
    return this.receiver.epoch;
  }

  probe() {
    const r = this.receiver;
    // A diverged replica says what it applied, as before: it holds something, but not a
    // replica it may take over with.
    const appliedSeq = r.state === "diverged" ? r.appliedSeq : this.heldSeq;
    const replica = r.eligible && !this.machine.replicaDeviceFailed;
    return { role: "standby" as const, replica, appliedSeq };
  }

  private facts(): StandbyFacts {
    const { supervisor } = this.deps;
    return {
      eligible: this.receiver.eligible && !this.machine.replicaDeviceFailed,
      holdsReplica: this.holdsReplica,
      maintenancePaused: supervisor.maintenancePaused(),
      epoch: supervisor.epoch(),
      backlog: this.receiver.backlog,
    };
  }

  /** One look of the lease watch (every heartbeat/2). */
  private watchLease(): void {
    // A primary out of sight for a lease does no more device work that we know of: what we
    // held for its device goes to ours (a takeover, a recovery or a rejoin may follow).
    if (this.receiver.heldEntries > 0 && !this.primaryInSight()) this.releaseHeld();
    const actions = this.machine.tick(this.deps.now(), this.lastHeardMs(), this.facts());
    this.link.lastMessageMs = this.machine.heardMs;
    this.run(actions);
  }

  private run(actions: readonly StandbyAction[]): void {
    for (const a of actions) this.act(a);
  }

  private act(a: StandbyAction): void {
    const { deps, machine } = this;
    switch (a.kind) {
      case "note":
        deps.observer.note?.(a.note);
        return;
      case "park":
        deps.timers.clear(this.parkTimer);
        this.parkTimer = deps.timers.setTimeout(a.ms, () => {
          machine.parkExpired();
          for (const s of this.parked.splice(0)) this.refuse(s);
        });
        return;
      case "promote":
        deps.supervisor.promote(a.reason, a.force, a.epoch);
        return;
      case "probePeer":
        deps.supervisor.probePeer((peer) => this.run(machine.peerProbed(peer, this.facts())));
        return;
      case "etcdRead":
        deps.etcd!.port.read((error, view) => {
          this.etcdView = view;
          const reading = error ?? view ?? new Error("etcd: no answer");
          this.run(machine.etcdRead(reading, this.facts()));
        });
        return;
      case "etcdAcquire":
        deps.etcd!.port.acquire(this.etcdView!, a.epoch, (error, acquired) =>
          this.run(machine.etcdAcquired(error ?? acquired, this.facts(), deps.now())),
        );
        return;
      case "deviceFailed":
        deps.supervisor.deviceFailed(a.failure);
        return;
      case "awaitDevice": {
        this.releaseHeld();
        const backend = this.receiver.backend;
        // A failed device never answers afterDevice (nor applies what was just released).
        const failure = backend?.progress.failure;
        if (failure !== undefined) {
          this.deviceFailed(failure);
          return;
        }
        let waited = false;
        const applied = () => {
          const facts = this.facts();
          // An idle device with a backlog would answer at once, for ever (the stack overflowed
          // at failover seed 6635): every entry released is handed to the device.
          invariant(waited || facts.backlog === 0, "awaitDevice: a backlog no device applies");
          this.run(machine.backlogApplied(deps.now(), facts));
        };
        if (backend === undefined) applied();
        else backend.progress.afterDevice(applied);
        waited = true;
        return;
      }
    }
  }

  /**
   * The primary will do no more: what was held for its device goes to ours now (a frame its
   * DeviceFault named is recorded DEVICE_FAULT instead of running).
   */
  private releaseHeld(): void {
    this.receiver.releaseHeld();
    this.afterStep();
  }

  /** NOT_PRIMARY, naming the primary only while it is known to be alive. */
  private refuse(stream: G): void {
    const fresh = this.link.connected && this.primaryInSight();
    this.deps.guests.refuse(stream, fresh ? this.deps.peerGuestAddress : "");
  }

  /**
   * Follows the replica's device: acks its progress and sends what it produced; a failure of
   * it ends this standby's part (deviceFailed).
   */
  private followDevice(backend: Backend | undefined): void {
    this.unfollowDevice?.();
    this.unfollowDevice = undefined;
    if (backend === undefined) return;
    const { progress } = backend;
    const unProgress = progress.onProgress(() => {
      this.link.flush();
      this.afterStep();
    });
    const unFailure = progress.onFailure((f) => this.deviceFailed(f));
    this.unfollowDevice = () => {
      unProgress();
      unFailure();
    };
    if (progress.failure !== undefined) this.deviceFailed(progress.failure);
  }

  /**
   * The replica's device failed: it completes nothing more, so a takeover waiting for its
   * backlog would wait for ever (its afterDevice never answers) and, past the failure, work
   * handed to it is dropped while its done seq says complete. The machine gives the takeover
   * up for good and the node is told (Supervisor.deviceFailed: it steps down and exits).
   */
  private deviceFailed(failure: DeviceFailure): void {
    this.run(this.machine.deviceFailed(failure, this.receiver.backlog));
  }

  private afterStep(): void {
    const { supervisor, observer } = this.deps;
    const r = this.receiver;
    if (r.epoch > supervisor.epoch()) supervisor.adoptEpoch(r.epoch);
    for (const e of r.takeEvents()) {
      const replacing = e.kind === "snapshotDone" || e.kind === "foreignReplica";
      const replaced =
        replacing && this.replica !== undefined && this.replica !== r.backend
          ? this.replica
          : undefined;
      observer.receiverEvent?.(e, replaced);
      if (e.kind === "handover") this.run(this.machine.handover());
    }
    if (this.replica !== r.backend) this.followDevice(r.backend);
    this.replica = r.backend;
  }
}
