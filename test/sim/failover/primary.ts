// The primary role as the simulator runs it: a mirror of packages/daemon/src/roles/primary-role.ts
// and of the ReplicationClient shell (packages/primary/src/replication-client.ts), over the
// simulated process, timers and streams. The decisions are the real core's, called the same
// way: Sequencer, Sender, stepPeerLease, primaryLeaseEndMs, releasableSeq, stepGrant,
// stepSoloMark/soloWork, otherPrimaryWins. What differs from the daemon: no metrics, logs or
// checkpoints; the stream never reports a full buffer (no onDrain); the planned switchover's
// async function is a small state machine on the same 2 ms poll.
import {
  type DiscardedWork,
  GRANTED,
  type GrantState,
  grantBinds,
  grantDue,
  identityRefusal,
  lowerEpochRefusal,
  mayAcquire,
  NO_GRANT,
  otherPrimaryWins,
  type PrimaryMessage,
  primaryLeaseEndMs,
  RELEASE_ALL,
  type ReleaseView,
  releasableSeq,
  type SoloMark,
  type StandbyLinkState,
  type StandbyMessage,
  soloMarkAt,
  soloWork,
  stepGrant,
  stepPeerLease,
  stepSoloMark,
  type WorkCounters,
} from "@vgpu-ha/common";
import { Backend, computeDigest, SnapshotSource } from "@vgpu-ha/gpu-model";
import { Sender, type SenderEvent, Sequencer } from "@vgpu-ha/primary";
import type { SimArbiter } from "./etcd.js";
import type { ReleaseTag } from "./guest-protocol.js";
import { SimGuestService } from "./guest-service.js";
import { LineageLog } from "./lineage.js";
import type { End } from "./net.js";
import type { Timer } from "./process.js";
import { CLUSTER, type SimRoleDeps } from "./roles.js";
import { SimFailure } from "./world.js";

export interface Takeover {
  readonly backend: Backend;
  readonly lastSeq: number;
}

type LeaseState = "leased" | "fenced" | "degraded";
type ToStandby = End<PrimaryMessage, StandbyMessage>;

const SWITCHOVER_TIMEOUT_MS = 10_000;

export class SimPrimary {
  readonly name = "primary" as const;
  readonly deps: SimRoleDeps;
  /** This role instance, for the checker (one per node, epoch and promotion). */
  readonly tenure: number;
  readonly backend: Backend;
  readonly log: LineageLog;
  readonly sequencer: Sequencer;
  readonly guests: SimGuestService;
  readonly sender: Sender;
  readonly epochAtStart: number;
  private readonly promoted: boolean;
  private stopping = false;
  private flushTimer: Timer | undefined;
  private leaseTimer: Timer | undefined;
  private nextSnapshotId: number;
  private nextSession = 1;
  lease: LeaseState = "fenced";
  private fencedSinceMs: number | undefined;
  /** When the lease was last stepped: stepPeerLease notices this process was stopped. */
  private leaseSteppedMs: number | undefined;
  private confirmedSeq = 0;
  private grant: GrantState = NO_GRANT;
  private solo: SoloMark | undefined;
  /** Counts the stretches without the lease (for the checker's tags). */
  private soloPeriod = 0;
  private handingOver:
    | { lastSeq: number; digest: string; done: () => void; startedMs: number }
    | undefined;
  // the ReplicationClient shell
  private link: ToStandby | undefined;
  private ticker: Timer | undefined;
  private redial: Timer | undefined;
  private clientStopped = false;
  /** The standby accepted a handover: guests go to it from now on. */
  private handedOff = false;

  constructor(deps: SimRoleDeps, takeover?: Takeover) {
    this.deps = deps;
    this.promoted = takeover !== undefined;
    this.tenure = deps.checker.newTenure();
    const { params, proc } = deps;
    this.epochAtStart = deps.supervisor.epoch();
    this.backend = takeover?.backend ?? new Backend(deps.backendOptions);
    this.backend.trackMmio = params.mmio === "per-page";
    this.log = new LineageLog(
      takeover?.lastSeq ?? 0,
      deps.lineages,
      this.backend,
      `primary ${deps.node}#${this.tenure}`,
    );
    this.sequencer = new Sequencer(
      this.backend,
      this.log,
      { mmio: params.mmio, flushBytes: params.flushBytes },
      () => proc.now(),
    );
    this.nextSnapshotId = Math.floor(proc.wallMs() * 1000);
    this.sender = new Sender(
      {
        clusterId: CLUSTER,
        nodeId: deps.node,
        peerName: deps.peer,
        ...params.sender,
        heartbeatMs: params.lease.heartbeatMs,
      },
      this.log,
      () => this.startSnapshot(),
      deps.supervisor.epoch(),
    );
    this.guests = new SimGuestService({
      proc,
      sequencer: this.sequencer,
      nodeId: deps.node,
      epoch: () => deps.supervisor.epoch(),
      maxFramesInFlight: 1024,
      serving: () => !this.stopping && !this.handedOff,
      replicatedSeq: () => this.releasableSeqNow(),
      afterApply: () => this.afterGuestMessage(),
      redirect: () => deps.peer,
      newSessionId: () => `${deps.node}${deps.supervisor.epoch()}-${this.nextSession++}`,
      tag: () => this.tag(),
      onRelease: (released) => deps.checker.released(this, released),
    });
    deps.checker.tenureStarted(this);
  }

  start(): void {
    this.fencedSinceMs = this.deps.proc.now();
    if (this.deps.arbiter) this.deps.arbiter.onLost = () => this.checkLease();
    if (this.promoted) {
      this.lease = "degraded";
      this.confirmedSeq = this.log.lastSeq;
      this.solo = soloMarkAt(this.confirmedSeq, this.workCounters());
      this.deps.checker.leaseStep(this, this.lease);
    }
    this.clientStart();
    const tickMs = Math.max(5, Math.floor(this.deps.params.lease.heartbeatMs / 2));
    this.leaseTimer = this.deps.proc.setInterval(tickMs, () => this.checkLease());
  }

  stop(reason: string): void {
    this.stopping = true;
    this.deps.proc.clear(this.flushTimer);
    this.deps.proc.clear(this.leaseTimer);
    this.guests.endAll(reason);
    this.clientStop();
    this.sender.disconnected();
  }

  /** The checker's tag for a reply released now. */
  tag(): ReleaseTag {
    return {
      tenure: this.tenure,
      soloPeriod: this.soloPeriod,
      // Serving without its peer lease (peer mode: degraded; etcd mode: on the key alone).
      degraded: this.lease !== "leased",
      excused: this.deps.checker.excused,
    };
  }

  /** The lease as a release judged now would see it (the checker's view of this primary). */
  effectiveLease(): LeaseState {
    return this.releaseView().lease;
  }

  // ---- the lease ----

  private leaseEndMs(): number {
    return primaryLeaseEndMs(this.sender.ackedHeartbeatUs / 1000, this.deps.params.lease);
  }

  private checkLease(): void {
    if (this.stopping) return;
    const now = this.deps.proc.now();
    const before = this.lease;
    const step = stepPeerLease(
      { lease: this.lease, fencedSinceMs: this.fencedSinceMs, steppedMs: this.leaseSteppedMs },
      now,
      this.sender.ackedHeartbeatUs > 0 ? this.leaseEndMs() : undefined,
      this.deps.params.lease.leaseMs,
    );
    this.lease = step.lease;
    this.fencedSinceMs = step.fencedSinceMs;
    this.leaseSteppedMs = step.steppedMs;
    this.solo = stepSoloMark(this.lease, this.solo, this.confirmedSeq, this.workCounters());
    if (this.deps.arbiter) this.etcdTick(now, this.deps.arbiter);
    else this.updateGrant();
    if (before !== this.lease) {
      if (this.lease === "leased") this.soloPeriod++;
      if (this.lease === "degraded") this.deps.stats.degradedPeriods++;
      if (this.lease === "fenced") this.deps.stats.fencedPeriods++;
      this.deps.checker.leaseStep(this, this.lease);
      this.guests.release();
    }
  }

  private releaseView(): ReleaseView {
    const sender = this.sender;
    const now = this.deps.proc.now();
    const lapsed = this.lease === "leased" && now >= this.leaseEndMs();
    const link: StandbyLinkState =
      sender.state === "streaming"
        ? "streaming"
        : sender.state === "snapshot"
          ? "snapshot"
          : "down";
    let lease: LeaseState = lapsed ? "fenced" : this.lease;
    // etcd mode: the right to serve is the etcd lease alone; the grant is in the record.
    const arbiter = this.deps.arbiter;
    if (arbiter) lease = now < arbiter.leaseEndMs() ? "leased" : "fenced";
    return {
      mode: this.deps.params.ackMode,
      lease,
      link,
      granted: grantBinds(this.grant),
      appliedSeq: sender.appliedSeq,
      confirmedSeq: this.confirmedSeq,
    };
  }

  private updateGrant(): void {
    this.grant = stepGrant(this.grant, {
      ...this.releaseView(),
      releasedSeq: this.guests.releasedSeq,
      snapshotChunksAcked: this.sender.snapshotProgress?.chunksAcked ?? 0,
      nowUs: Math.round(this.deps.proc.now() * 1000),
      echoedUs: this.sender.ackedHeartbeatUs,
    });
    this.sender.syncGrant = this.grant.granted;
  }

  // ---- etcd mode (PrimaryRole.etcdTick, nameStandby, retakeKey, etcdRun) ----

  private etcdBusy = false;
  private etcdLastTryMs = Number.NEGATIVE_INFINITY;

  /**
   * Keeps the record's `replica` in step with the grant — named once the standby has
   * everything released (the heartbeat grant follows the write), cleared (and only then the
   * grant dropped) when the standby's link lapses or a snapshot replaced its state. A node that
   * lost the key tries to take it back while it may (it holds the newest state).
   */
  private etcdTick(now: number, arbiter: SimArbiter): void {
    if (this.etcdBusy || this.stopping) return;
    const sender = this.sender;
    if (!arbiter.holding) {
      if (this.handingOver) return; // a switchover gave the key up for the standby
      if (now - this.etcdLastTryMs < this.deps.params.etcd!.pollMs) return;
      this.etcdLastTryMs = now;
      this.etcdBusy = true;
      this.retakeKey(arbiter, () => {
        this.etcdBusy = false;
      });
      return;
    }
    if (now >= arbiter.leaseEndMs()) return; // fenced until a keepalive is answered
    const epoch = this.deps.supervisor.epoch();
    const replaced = sender.state === "snapshot" && (sender.snapshotProgress?.chunksAcked ?? 0) > 0;
    if (this.grant.granted && (this.lease !== "leased" || replaced)) {
      sender.syncGrant = false;
      this.etcdBusy = true;
      arbiter.setReplica(epoch, "", (error, written) => {
        this.etcdBusy = false;
        if (error || !written || this.stopping) return;
        this.grant = NO_GRANT;
        this.guests.release();
      });
    } else if (
      !this.grant.granted &&
      this.lease === "leased" && // not while the link lapsed: the name would flap each poll
      grantDue({ ...this.releaseView(), releasedSeq: this.guests.releasedSeq })
    ) {
      this.grant = GRANTED; // from now on only what the standby confirms goes out
      this.nameStandby(arbiter, epoch);
    } else if (this.grant.granted && !sender.syncGrant && this.lease === "leased") {
      this.nameStandby(arbiter, epoch); // an earlier write failed
    }
  }

  private nameStandby(arbiter: SimArbiter, epoch: number): void {
    this.etcdBusy = true;
    arbiter.setReplica(epoch, this.deps.peer, (error, written) => {
      this.etcdBusy = false;
      if (error || !written || this.stopping) return;
      this.sender.syncGrant = true;
    });
  }

  /** Lost the key but still holding the newest state: take it back when the rule allows. */
  private retakeKey(arbiter: SimArbiter, done: () => void): void {
    const { supervisor, node } = this.deps;
    arbiter.read((error, view) => {
      if (error || view === undefined || view.leader || this.stopping) return done();
      const decision = mayAcquire({
        me: node,
        configuredPrimary: this.deps.configured === "primary",
        leaderPresent: false,
        record: view.record,
        mine: "primary-state",
        peer: undefined,
        localEpoch: supervisor.epoch(),
      });
      if (!decision.acquire) return done();
      arbiter.acquire(view, decision.epoch, (acquireError, acquired) => {
        done();
        if (acquireError || !acquired || this.stopping) return;
        supervisor.adoptEpoch(decision.epoch);
        this.sender.epoch = decision.epoch;
        this.grant = NO_GRANT;
        this.sender.syncGrant = false;
        this.deps.stats.etcdKeyRetaken++;
        this.guests.release();
      });
    });
  }

  private releasableSeqNow(): number | undefined {
    const seq = releasableSeq(this.releaseView());
    return seq === RELEASE_ALL ? undefined : seq;
  }

  private workCounters(): WorkCounters {
    return { lastSeq: this.log.lastSeq, ...this.guests.applied };
  }

  soloWork(): DiscardedWork {
    return soloWork(this.solo, this.workCounters());
  }

  /** Another primary dials us: the lower epoch steps down. */
  acceptReplication(link: End<StandbyMessage, PrimaryMessage>): void {
    const mine = this.deps.supervisor.epoch();
    let first = true;
    link.onMessage((m) => {
      // The first message decides (as PrimaryRole.acceptReplication): a stream that does not
      // start with a hello is refused; a duplicate hello later changes nothing.
      if (!first) return;
      first = false;
      const rule = { clusterId: CLUSTER, nodeId: this.deps.node, peerName: this.deps.peer };
      if (m.kind !== "hello" || identityRefusal(rule, m) !== null) {
        return link.close("not our peer");
      }
      this.deps.stats.primariesMet++;
      if (otherPrimaryWins({ epoch: mine, nodeId: this.deps.node }, m)) {
        link.close("stepping down");
        this.deps.supervisor.stepDown(m.epoch, `met primary ${m.nodeId} of epoch ${m.epoch}`);
      } else {
        const self = { clusterId: CLUSTER, nodeId: this.deps.node, epoch: mine };
        for (const out of lowerEpochRefusal(self)) link.send(out);
        this.deps.proc.setTimeout(100, () => link.close("refused a lower epoch"));
      }
    });
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
      this.deps.params.snapshotChunkBytes,
    );
    this.deps.lineages.snapshotTaken(source.snapshotId, source.atSeq, this.backend);
    return source;
  }

  private afterGuestMessage(): void {
    if (this.sequencer.mmioPending && this.flushTimer === undefined) {
      this.flushTimer = this.deps.proc.setTimeout(this.deps.params.flushDelayMs, () => {
        this.flushTimer = undefined;
        this.sequencer.flushMmio();
        this.afterGuestMessage();
      });
    }
    this.pump();
    this.applyBackPressure();
    this.guests.release();
  }

  private onReplicationProgress(): void {
    if (this.sender.inSync) this.confirmedSeq = Math.max(this.confirmedSeq, this.sender.appliedSeq);
    this.checkLease();
    this.guests.release();
    this.applyBackPressure();
  }

  private applyBackPressure(): void {
    const sender = this.sender;
    if (this.handingOver) return;
    const p = this.deps.params;
    if (sender.state !== "streaming" && sender.state !== "snapshot") {
      this.guests.setPaused(false);
      return;
    }
    const snapshot = sender.state === "snapshot";
    const lag = this.log.lagAfter(
      snapshot ? (sender.snapshotProgress?.atSeq ?? 0) : sender.appliedSeq,
      this.deps.proc.now(),
    );
    const maxLagMs = p.lease.leaseMs * 0.4;
    const tooOld = !snapshot && lag.seconds * 1000 > maxLagMs;
    this.guests.setPaused(lag.entries > p.maxLagEntries || tooOld);
  }

  private onSenderEvent(e: SenderEvent): void {
    const { stats } = this.deps;
    switch (e.kind) {
      case "snapshotStarted":
        stats.snapshotsStarted++;
        break;
      case "resumed":
        stats.resumedFromLog++;
        break;
      case "higherEpoch":
        stats.staleEpochRefusals++;
        this.deps.supervisor.stepDown(e.epoch, `peer is at epoch ${e.epoch}`);
        break;
      case "handoverAccepted":
        stats.handoversAccepted++;
        // Send the guests over now: the standby parks them until it serves as primary.
        this.handedOff = true;
        this.guests.endAll("switchover: the standby is taking over");
        // etcd mode: the standby takes over only by taking the key: name it (a lapse during
        // the handover may have cleared the name), then give the key up (handKeyOver).
        if (this.deps.arbiter) {
          const arbiter = this.deps.arbiter;
          this.etcdBusy = true;
          arbiter.setReplica(this.deps.supervisor.epoch(), this.deps.peer, (error, written) => {
            this.etcdBusy = false;
            if (!error && written) arbiter.resign();
          });
        }
        break;
      case "checkpoint":
        throw new SimFailure(`checkpoint event without a checkpoint: ${JSON.stringify(e)}`);
      default:
        break;
    }
  }

  // ---- the ReplicationClient shell ----

  private clientStart(): void {
    const tickMs = Math.max(5, Math.min(50, this.deps.params.lease.heartbeatMs / 2));
    this.ticker = this.deps.proc.setInterval(tickMs, () => this.pump());
    this.dial();
  }

  private clientStop(): void {
    this.clientStopped = true;
    this.deps.proc.clear(this.ticker);
    this.deps.proc.clear(this.redial);
    this.link?.close("primary stopping");
  }

  private dial(): void {
    if (this.clientStopped) return;
    const link = this.deps.dialPeer();
    link.onMessage((message) => {
      this.sender.step(message, this.deps.proc.now());
      this.afterStep();
    });
    link.onClose(() => {
      if (this.link === link) this.link = undefined;
      this.sender.disconnected();
      this.afterStep();
      if (!this.clientStopped) {
        this.redial = this.deps.proc.setTimeout(this.deps.params.reconnectMs, () => this.dial());
      }
    });
    this.link = link;
    this.sender.connected(this.deps.proc.now());
    this.pump();
  }

  private afterStep(): void {
    for (const event of this.sender.takeEvents()) this.onSenderEvent(event);
    this.onReplicationProgress();
    this.pump();
  }

  private pump(): void {
    const { sender, log } = this;
    log.release(sender.releasableSeq, this.deps.params.sender.retainBytes);
    if (this.link === undefined) return;
    for (const m of sender.poll(this.deps.proc.now())) this.link.send(m);
    for (const event of sender.takeEvents()) this.onSenderEvent(event);
  }

  // ---- planned switchover ----

  /**
   * Starts a planned switchover (PrimaryRole.switchover): refused without a standby in sync
   * or without the lease; else guests pause, and a 2 ms poll waits until the standby applied
   * everything and every reply is out, then hands over. `settled` is told how it ended.
   */
  switchover(settled: (outcome: string) => void): string | undefined {
    if (!this.sender.inSync || this.lease !== "leased") return "no standby in sync to hand over to";
    if (this.handingOver) return "a switchover is already in progress";
    const started = this.deps.proc.now();
    this.guests.setPaused(true);
    this.handingOver = { lastSeq: -1, digest: "", done: () => undefined, startedMs: started };
    const fail = (why: string) => {
      this.handingOver = undefined;
      this.sender.cancelHandover();
      if (this.deps.arbiter) this.handedOff = false;
      this.guests.setPaused(false);
      settled(why);
    };
    this.sequencer.flushMmio();
    // Announce the handover at the last seq (an empty digest): the standby computes its digest
    // there while this node computes its own.
    const announcedSeq = this.log.lastSeq;
    this.sender.handover("");
    this.pump();
    const early = computeDigest(this.backend).state;
    const deadline = started + SWITCHOVER_TIMEOUT_MS;
    const poll = () => {
      if (this.stopping) return;
      // etcd mode: the standby takes over only by the record naming it: wait until it does.
      const unnamed = this.deps.arbiter !== undefined && !this.sender.syncGrant;
      if (this.sender.appliedSeq < this.log.lastSeq || this.guests.heldReplies > 0 || unnamed) {
        if (this.deps.proc.now() > deadline || !this.sender.inSync) {
          fail(`standby at ${this.sender.appliedSeq} of ${this.log.lastSeq}: not handing over`);
          return;
        }
        this.deps.proc.setTimeout(2, poll);
        return;
      }
      const lastSeq = this.log.lastSeq;
      const digest = lastSeq === announcedSeq ? early : computeDigest(this.backend).state;
      let finished = false;
      this.handingOver = {
        lastSeq,
        digest,
        startedMs: started,
        done: () => {
          finished = true;
          settled("done");
        },
      };
      this.deps.proc.setTimeout(SWITCHOVER_TIMEOUT_MS, () => {
        if (!finished) fail("the standby did not take over");
      });
      this.sender.handover(digest);
      this.pump();
    };
    poll();
    return undefined;
  }

  handedOver(): Takeover | undefined {
    const h = this.handingOver;
    if (!h || h.lastSeq !== this.log.lastSeq) return undefined;
    return { backend: this.backend, lastSeq: h.lastSeq };
  }

  steppedDown(): void {
    this.handingOver?.done();
  }

  describe(): string {
    return `primary@${this.deps.supervisor.epoch()} ${this.lease} log ${this.log.lastSeq} sender ${this.sender.state}/${this.sender.appliedSeq}${this.grant.granted ? " granted" : this.grant.revokedAtUs !== undefined ? " revoking" : ""} held ${this.guests.heldReplies}${this.guests.isPaused ? " paused" : ""}${this.handingOver ? " handing-over" : ""}`;
  }
}
