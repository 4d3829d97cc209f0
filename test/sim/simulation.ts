// One seeded run: the real Sequencer, Sender and Receiver (with the real log, applier and
// snapshot code) driven by a simulated clock, a simulated link and simulated guests. Load runs
// with faults (delay, loss, duplication, reordering, broken links, late and restarted
// standbys); then the network heals and the load stops, and the run must reach quiescence
// within a bound. Safety is checked all along (StandbyMonitor, and each sync reply against
// what the standby holds when it is released); at quiescence the replicas must be equal.
//
// Both devices are executors of random latency on the simulated clock (gpu-model's
// LatencyExecutor: each operation completes an exponential delay after the one before, VRAM
// bytes, dmaRead data and digests included): entries leave before
// the primary's device ran them, the standby acks receipt at once and applied progress later,
// replies leave by the shipped release rule (core/release.ts) and each is checked against the
// mode's promise: sync — the standby received it; sync-applied — it applied it; every mode —
// the primary's device did. Promotion probes run the shipped StandbyMachine at random moments:
// it may take over only once its device applied the whole received backlog. In async and sync
// the standby holds each entry's device work until the primary's device has done it
// (holdsStandbyDevice): every entry it applies is checked against the primary's done seq.
import {
  holdsStandbyDevice,
  type PrimaryMessage,
  RELEASE_ALL,
  releasableSeq,
  type StandbyMessage,
} from "@vgpu-ha/common";
import {
  Backend,
  type BackendOptions,
  digestWhenDone,
  LatencyExecutor,
  SnapshotSource,
  type StateDigest,
} from "@vgpu-ha/gpu-model";
import { Sender, type SenderEvent, Sequencer } from "@vgpu-ha/primary";
import { Receiver, type StandbyAction, StandbyMachine } from "@vgpu-ha/standby";
import { EventQueue } from "./event-queue.js";
import { SimLink } from "./network.js";
import type { SimParams } from "./params.js";
import { frameKey, RecordingLog } from "./recording-log.js";
import { SimRng } from "./rng.js";
import { describeEvent, type SimEvent } from "./sim-events.js";
import { emptyStats, type SimResult, type SimStats } from "./sim-result.js";
import { SimFailure, StandbyMonitor } from "./standby-monitor.js";
import {
  backendOptionsFor,
  generateWorkload,
  type Workload,
  type WorkloadStep,
} from "./workload.js";

interface PendingReply {
  readonly session: string;
  readonly frame: number;
  readonly seq: number;
}

const MAX_EVENTS = 2_000_000;
const LOAD_BOUND_MS = 60_000;

type SessionRecord = NonNullable<ReturnType<Backend["sessions"]["get"]>>;

export class Simulation {
  readonly params: SimParams;
  private nowMs = 0;
  private readonly queue = new EventQueue<SimEvent>();
  private readonly rng: { guests: SimRng; faults: SimRng; devices: SimRng };
  private readonly toStandby: SimLink;
  private readonly toPrimary: SimLink;
  private trace = 0x811c9dc5;
  // primary
  private readonly log = new RecordingLog();
  private readonly backend: Backend;
  private readonly sequencer: Sequencer;
  private readonly sender: Sender;
  /** The standby holds device work until the primary's device has done it (by the mode). */
  private readonly holds: boolean;
  /** The highest seq whose work the primary's device had done when last looked at. */
  private primaryDoneHigh = 0;
  private nextSnapshotId = 1;
  private nextCheckpointId = 1;
  private flushArmed = false;
  // standby
  private receiver: Receiver | undefined;
  /** The backend whose device progress the standby follows (a snapshot brings a new one). */
  private followed: Backend | undefined;
  /**
   * The connection on which the standby got more than a hello: the primary has its hello, so
   * what the standby says unasked (device progress) may go out. This link reorders; a real
   * stream keeps the hello first.
   */
  private standbyStreaming = -1;
  private readonly monitor: StandbyMonitor;
  private readonly standbyOptions: Receiver["options"]["backendOptions"];
  private linkUp = false;
  private connection = 0;
  // guests
  private readonly guestSessions: Workload["sessions"];
  private readonly steps: readonly WorkloadStep[];
  private readonly sessions = new Map<string, SessionRecord>();
  private readonly inflight = new Map<string, number>();
  private nextStep = 0;
  private waitingForReply = false;
  private pending: PendingReply[] = [];
  private healed = false;
  /** Both replicas' state digest once they were found equal. */
  private finalDigest = "";
  readonly stats: SimStats = emptyStats();

  /** Called with a line per event when set (the CLI's --trace). */
  private readonly onTrace: ((line: string) => void) | undefined;

  constructor(params: SimParams, onTrace?: (line: string) => void) {
    this.params = params;
    this.onTrace = onTrace;
    const root = new SimRng(params.seed);
    this.rng = { guests: root.fork(1), faults: root.fork(2), devices: root.fork(5) };
    this.toStandby = new SimLink(params.network, root.fork(3));
    this.toPrimary = new SimLink(params.network, root.fork(4));
    const w = params.workload;
    const workload = generateWorkload(params.seed, {
      frames: w.frames,
      sessions: w.sessions,
      tenants: w.tenants,
      invalidPercent: w.invalidPercent,
      resendPercent: w.resendPercent,
    });
    this.steps = workload.steps;
    const options = backendOptionsFor(workload, params.seed & 0xffff);
    this.backend = new Backend({
      ...options,
      trackMmio: true,
      ...this.device("primary", params.primaryDeviceMeanMs),
    });
    this.standbyOptions = {
      ...options,
      device: { ...options.device, seed: (params.seed & 0xffff) + 1000 },
      trackMmio: false,
      ...this.device("standby", params.standbyDeviceMeanMs),
    };
    this.sequencer = new Sequencer(
      this.backend,
      this.log,
      { mmio: params.mmio, flushBytes: params.flushBytes },
      () => this.nowMs,
    );
    this.holds = holdsStandbyDevice(params.ackMode);
    this.sender = new Sender(
      {
        clusterId: "sim",
        nodeId: "primary",
        peerName: "standby",
        ...params.sender,
        holdStandby: this.holds,
        deviceDoneSeq: () => this.primaryDone(),
      },
      this.log,
      () => {
        this.sequencer.flushMmio();
        const id = this.nextSnapshotId++;
        return new SnapshotSource(this.backend, id, this.log.lastSeq, params.snapshotChunkBytes);
      },
      1,
    );
    this.monitor = new StandbyMonitor(this.log.all);
    this.guestSessions = workload.sessions;
  }

  run(): SimResult {
    let failure: string | undefined;
    try {
      this.start();
      this.loop();
      this.checkQuiescent();
    } catch (e) {
      const what = e instanceof SimFailure ? e.message : `crash: ${(e as Error).stack ?? e}`;
      failure = `seed ${this.params.seed} at t=${this.nowMs.toFixed(3)}ms: ${what}`;
    }
    this.stats.entries = this.log.lastSeq;
    this.stats.entriesApplied = this.monitor.applied;
    this.stats.snapshotsInstalled = this.monitor.snapshotsInstalled;
    for (const link of [this.toStandby, this.toPrimary]) {
      this.stats.messagesDropped += link.stats.dropped;
      this.stats.messagesDuplicated += link.stats.duplicated;
      this.stats.messagesReordered += link.stats.reordered;
    }
    return {
      seed: this.params.seed,
      failure,
      endMs: this.nowMs,
      lastSeq: this.log.lastSeq,
      digest: this.finalDigest,
      trace: this.trace >>> 0,
      stats: this.stats,
    };
  }

  // ---- the event loop ----

  private start(): void {
    const p = this.params;
    const { faults } = this.rng;
    for (const s of this.guestSessions) {
      const opened = this.sequencer.openSession(s.id, s.tenant);
      if ("code" in opened) throw new SimFailure(`cannot open session ${s.id}: ${opened.message}`);
      this.sessions.set(s.id, opened);
      this.inflight.set(s.id, 0);
    }
    this.at(p.standbyStartMs, { kind: "standbyStart" });
    this.at(0, { kind: "issue" });
    this.at(p.tickMs, { kind: "tick" });
    if (p.checkpointEveryMs > 0) this.at(p.checkpointEveryMs, { kind: "checkpoint" });
    if (p.network.disconnectsPerSec > 0) {
      this.at(faults.exponential(1000 / p.network.disconnectsPerSec), { kind: "disconnect" });
    }
    if (p.standbyRestartsPerSec > 0) {
      this.at(faults.exponential(1000 / p.standbyRestartsPerSec), { kind: "standbyRestart" });
    }
    this.at(faults.exponential(1000 / p.promotionProbesPerSec), { kind: "promotionProbe" });
  }

  private loop(): void {
    let healedAtMs = Number.POSITIVE_INFINITY;
    for (;;) {
      if (!this.healed && (this.nextStep >= this.steps.length || this.nowMs >= LOAD_BOUND_MS)) {
        this.heal();
        healedAtMs = this.nowMs;
      }
      if (this.healed && this.quiescent()) return;
      if (this.nowMs > healedAtMs + this.params.livenessBoundMs) {
        throw new SimFailure(
          `liveness: not caught up ${this.params.livenessBoundMs}ms after healing: ${this.describe()}`,
        );
      }
      const next = this.queue.pop();
      if (next === undefined) throw new SimFailure(`nothing left to happen: ${this.describe()}`);
      if (++this.stats.events > MAX_EVENTS) throw new SimFailure(`more than ${MAX_EVENTS} events`);
      this.nowMs = next.atMs;
      this.record(next.event.kind);
      if (this.onTrace)
        this.onTrace(
          `t=${this.nowMs.toFixed(3)} ${describeEvent(next.event)} | ${this.describe()}`,
        );
      this.handle(next.event);
      this.pump();
    }
  }

  private handle(event: SimEvent): void {
    switch (event.kind) {
      case "issue":
        this.issue();
        break;
      case "flush":
        this.flushArmed = false;
        this.sequencer.flushMmio();
        break;
      case "tick":
        this.at(this.nowMs + this.params.tickMs, { kind: "tick" });
        break;
      case "checkpoint":
        this.checkpoint();
        break;
      case "toStandby":
        this.deliverToStandby(event.connection, event.message);
        break;
      case "toPrimary":
        this.deliverToPrimary(event.connection, event.message);
        break;
      case "disconnect":
        this.disconnectFault();
        break;
      case "reconnect":
        this.connect();
        break;
      case "standbyStart":
        this.startStandby();
        break;
      case "standbyRestart":
        this.restartStandby();
        break;
      case "device":
        event.complete();
        break;
      case "promotionProbe":
        this.promotionProbe();
        break;
    }
  }

  /** What the primary's shell does after anything happens: release, poll, send. */
  private pump(): void {
    const { sender, log } = this;
    if ((this.receiver?.heldEntries ?? 0) > 0) this.stats.holdsSeen++;
    log.release(sender.releasableSeq, sender.options.retainBytes);
    if (this.linkUp) {
      for (const message of sender.poll(this.nowMs))
        this.send(this.toStandby, message, "toStandby");
    }
    this.onSenderEvents(sender.takeEvents());
    this.releaseReplies();
  }

  // ---- guests ----

  private issue(): void {
    const step = this.steps[this.nextStep];
    if (step === undefined) return;
    if (this.inflight.get(step.session)! >= this.params.workload.windowFrames) {
      this.waitingForReply = true; // the guest's window is full: go on when a reply comes
      return;
    }
    this.nextStep++;
    this.stats.framesIssued++;
    const { outcome, seq } = this.sequencer.applyFrame(
      this.sessions.get(step.session)!,
      step.frame,
    );
    const e = step.expect;
    const handle =
      outcome.result.output.kind === "handle" ? outcome.result.output.handle : undefined;
    if (
      outcome.kind !== e.outcome ||
      outcome.result.code !== e.code ||
      (e.handle !== undefined && handle !== e.handle)
    ) {
      throw new SimFailure(
        `frame ${step.frame.number} of ${step.session} (${e.action}): primary gave ${outcome.kind} code ${outcome.result.code} handle ${handle}, expected ${e.outcome} code ${e.code} handle ${e.handle}`,
      );
    }
    this.inflight.set(step.session, this.inflight.get(step.session)! + 1);
    this.pending.push({ session: step.session, frame: step.frame.number, seq });
    if (this.sequencer.mmioPending && !this.flushArmed) {
      this.flushArmed = true;
      this.at(this.nowMs + this.params.flushIntervalMs, { kind: "flush" });
    }
    this.at(this.nowMs + this.rng.guests.exponential(this.params.workload.issueGapMs), {
      kind: "issue",
    });
  }

  /**
   * Releases the replies the shipped rule allows (releasableSeq: the mode, the standby's acks,
   * the primary's device), checking each against the mode's promise. The simulated primary
   * holds its lease throughout and grants a streaming standby (no lease faults here: the
   * failover simulator has them).
   */
  private releaseReplies(): void {
    if (this.pending.length === 0) return;
    const { sender } = this;
    const mode = this.params.ackMode;
    const upto = this.log.lastSeq + (this.sequencer.mmioPending ? 1 : 0);
    const done = this.backend.progress.doneSeq(upto);
    const released = releasableSeq({
      mode,
      lease: "leased",
      link: sender.inSync ? "streaming" : sender.state === "snapshot" ? "snapshot" : "down",
      granted: sender.inSync,
      appliedSeq: sender.appliedSeq,
      receivedSeq: sender.receivedSeq,
      confirmedSeq: 0,
      deviceSeq: done >= upto ? RELEASE_ALL : done,
    });
    const kept: PendingReply[] = [];
    for (const r of this.pending) {
      if (r.seq > released) {
        kept.push(r);
        continue;
      }
      this.checkDeviceDone(r);
      if (mode === "async" || r.seq === 0) this.stats.repliesAtOnce++;
      else if (!sender.inSync) this.stats.repliesDegraded++;
      else {
        this.checkSyncRelease(r);
        this.stats.repliesSync++;
      }
      this.inflight.set(r.session, this.inflight.get(r.session)! - 1);
    }
    if (kept.length === this.pending.length) return;
    this.pending = kept;
    if (this.waitingForReply) {
      this.waitingForReply = false;
      this.at(this.nowMs, { kind: "issue" });
    }
  }

  /** Every mode: a reply leaves only once the primary's own device has its result. */
  private checkDeviceDone(r: PendingReply): void {
    if (r.seq === 0) return;
    const done = this.backend.progress.doneSeq(r.seq);
    if (done < r.seq) {
      throw new SimFailure(
        `reply of ${r.session} frame ${r.frame} (seq ${r.seq}) released before the primary's device completed it (done up to ${done})`,
      );
    }
  }

  /**
   * The mode's promise: the standby running now has *received* (sync) or *applied*
   * (sync-applied) the entry that carries the frame (found in the log, so a wrong seq from the
   * Sequencer is caught too) and the seq the Sequencer named.
   */
  private checkSyncRelease(r: PendingReply): void {
    const receiver = this.receiver;
    const carrier = this.log.carriers.get(frameKey(r.session, r.frame));
    const mode = this.params.ackMode;
    const what = `${mode} reply of ${r.session} frame ${r.frame} (seq ${r.seq}, carried by ${carrier}) released`;
    if (receiver === undefined) throw new SimFailure(`${what} with no standby running`);
    if (carrier === undefined) throw new SimFailure(`${what} before any entry carried it`);
    const needed = Math.max(carrier, r.seq);
    // Received: applied (the monitor saw it), or held after those for the primary's device.
    const held = receiver.heldRange;
    const covered =
      held !== undefined && held.first === this.monitor.coveredSeq + 1
        ? held.last
        : this.monitor.coveredSeq;
    if (receiver.receivedSeq < needed || covered < needed) {
      throw new SimFailure(
        `${what} but standby #${this.monitor.incarnation} received only up to ${covered} (says ${receiver.receivedSeq}, sender thinks ${this.sender.receivedSeq})`,
      );
    }
    const applied = receiver.appliedSeq;
    if (mode === "sync-applied" && applied < needed) {
      throw new SimFailure(
        `${what} but standby #${this.monitor.incarnation} applied only up to ${applied} (received ${receiver.receivedSeq}, sender thinks applied ${this.sender.appliedSeq})`,
      );
    }
    if (applied < needed) this.stats.repliesBeforeStandbyApplied++;
    this.monitor.noteReleased(needed);
  }

  // ---- the devices and promotion ----

  /** A node's device: inline (mean 0) or one of random latency on the simulated clock. */
  private device(node: "primary" | "standby", meanMs: number): Pick<BackendOptions, "executor"> {
    if (meanMs === 0) return {};
    const rng = this.rng.devices;
    const schedule = (delayMs: number, complete: () => void) =>
      this.at(this.nowMs + delayMs, { kind: "device", node, complete });
    return { executor: () => new LatencyExecutor(schedule, () => rng.exponential(meanMs)) };
  }

  /**
   * Follows the device of each backend the standby installs (a snapshot's) and sends what its
   * progress produces (acks, late comparisons), as the standby driver does.
   */
  private followStandbyDevice(): void {
    const receiver = this.receiver;
    const backend = receiver?.backend;
    if (receiver === undefined || backend === undefined || this.followed === backend) return;
    this.followed = backend;
    backend.progress.onProgress(() => {
      if (this.receiver !== receiver || receiver.backend !== backend || !this.linkUp) return;
      if (this.standbyStreaming !== this.connection) return;
      for (const m of receiver.poll()) this.send(this.toPrimary, m, "toPrimary");
      this.monitor.onEvents(receiver.takeEvents());
    });
  }

  /**
   * The shipped StandbyMachine finds the primary's lease expired now: it may promote only once
   * the standby's device applied everything received, and then holds every released reply.
   */
  private promotionProbe(): void {
    this.at(this.nowMs + this.rng.faults.exponential(1000 / this.params.promotionProbesPerSec), {
      kind: "promotionProbe",
    });
    const receiver = this.receiver;
    if (receiver === undefined || receiver.state !== "replica" || this.healed) return;
    this.stats.promotionProbes++;
    const lease = { leaseMs: 100, heartbeatMs: 30, driftMarginMs: 10, maxDriftRatio: 0 };
    const machine = new StandbyMachine({
      nodeId: "standby",
      configuredPrimary: false,
      lease,
      etcdPollMs: undefined,
    });
    const facts = () => ({
      eligible: true,
      holdsReplica: true,
      maintenancePaused: false,
      epoch: 1,
      backlog: receiver.backlog,
    });
    const incarnation = this.monitor.incarnation;
    const run = (actions: readonly StandbyAction[]): void => {
      for (const a of actions) {
        if (a.kind === "awaitDevice") {
          this.stats.promotionBacklogWaits++;
          let waiting = true;
          receiver.backend!.progress.afterDevice(() => {
            // Entries held for the primary's device are not this probe's to take over (a real
            // takeover does: the failover simulator runs it): the machine waits on, rightly.
            if (waiting && receiver.heldEntries > 0) return;
            if (this.receiver === receiver && this.monitor.incarnation === incarnation) {
              run(machine.backlogApplied(this.nowMs, facts()));
            }
          });
          waiting = false;
        }
        if (a.kind === "promote") this.checkPromotion(receiver);
      }
    };
    const t = this.nowMs;
    machine.tick(t, t, facts());
    run(machine.tick(t + lease.heartbeatMs / 2, t - lease.leaseMs, facts()));
    run(machine.tick(t + lease.heartbeatMs, t - lease.leaseMs, facts()));
  }

  /** The primary's device done seq now (never lower than seen: a digest may hold it a while). */
  private primaryDone(): number {
    const now = this.backend.progress.doneSeq(this.log.lastSeq);
    if (now > this.primaryDoneHigh) this.primaryDoneHigh = now;
    return this.primaryDoneHigh;
  }

  /** A holding standby hands entry `seq` to its device only once the primary's device did it. */
  private checkHold(seq: number): void {
    if (!this.holds) return;
    this.stats.holdChecked++;
    const done = this.primaryDone();
    if (seq > done) {
      throw new SimFailure(
        `standby applied entry ${seq} before the primary's device had done it (done ${done})`,
      );
    }
  }

  private checkPromotion(receiver: Receiver): void {
    const what = `standby #${this.monitor.incarnation} promoted`;
    if (receiver.backlog !== 0) {
      throw new SimFailure(
        `${what} with a backlog: received ${receiver.receivedSeq}, applied ${receiver.appliedSeq}`,
      );
    }
    if (receiver.state === "replica" && receiver.appliedSeq < this.monitor.releasedSeq) {
      throw new SimFailure(
        `${what} holding up to ${receiver.appliedSeq}, replies released up to ${this.monitor.releasedSeq}`,
      );
    }
  }

  private checkpoint(): void {
    if (this.healed) return;
    this.stats.checkpoints++;
    this.sequencer.checkpoint(this.nextCheckpointId++);
    this.at(this.nowMs + this.params.checkpointEveryMs, { kind: "checkpoint" });
  }

  // ---- the link ----

  private send<M extends PrimaryMessage | StandbyMessage>(
    link: SimLink,
    message: M,
    kind: M extends PrimaryMessage ? "toStandby" : "toPrimary",
  ): void {
    const connection = this.connection;
    for (const atMs of link.deliveryTimes(this.nowMs)) {
      this.at(atMs, { kind, connection, message } as SimEvent);
    }
  }

  private deliverToStandby(connection: number, message: PrimaryMessage): void {
    const receiver = this.receiver;
    if (!this.linkUp || connection !== this.connection || receiver === undefined) return;
    if (message.kind !== "hello") this.standbyStreaming = connection;
    const replies = receiver.step(message);
    this.followStandbyDevice();
    this.monitor.onEvents(receiver.takeEvents());
    for (const reply of replies) this.send(this.toPrimary, reply, "toPrimary");
  }

  private deliverToPrimary(connection: number, message: StandbyMessage): void {
    if (!this.linkUp || connection !== this.connection) return;
    this.sender.step(message, this.nowMs);
  }

  private onSenderEvents(events: readonly SenderEvent[]): void {
    for (const e of events) {
      switch (e.kind) {
        case "snapshotStarted":
          this.stats.snapshotsStarted++;
          break;
        case "snapshotResumed":
          this.stats.snapshotsResumed++;
          break;
        case "resumed":
          this.stats.resumedFromLog++;
          break;
        case "resync":
          if (e.reason === "gap") this.stats.gapResyncs++;
          break;
        case "checkpoint":
          if (!e.equal) throw new SimFailure(`checkpoint ${e.requestId} at seq ${e.seq} differs`);
          break;
        case "refused":
        case "higherEpoch":
          throw new SimFailure(`sender: ${JSON.stringify(e)}`);
        default:
          break;
      }
    }
  }

  /** The link comes up (if a standby runs and it is down): both sides say hello. */
  private connect(): void {
    if (this.linkUp || this.receiver === undefined) return;
    this.linkUp = true;
    this.connection++;
    this.toStandby.reset();
    this.toPrimary.reset();
    this.sender.connected(this.nowMs);
    this.send(this.toPrimary, this.receiver.hello(), "toPrimary");
  }

  /** The link breaks: everything in flight is lost. */
  private disconnect(): void {
    if (!this.linkUp) return;
    this.linkUp = false;
    this.connection++;
    this.stats.disconnects++;
    this.sender.disconnected();
    this.receiver?.disconnected();
  }

  private disconnectFault(): void {
    if (this.healed) return;
    const { faults } = this.rng;
    const n = this.params.network;
    this.disconnect();
    this.at(this.nowMs + faults.int(1, n.reconnectMaxMs), { kind: "reconnect" });
    this.at(this.nowMs + faults.exponential(1000 / n.disconnectsPerSec), { kind: "disconnect" });
  }

  private startStandby(): void {
    if (this.receiver !== undefined) return;
    const receiver = new Receiver(
      {
        clusterId: "sim",
        nodeId: "standby",
        backendOptions: this.standbyOptions,
        apply: (backend, entry) => {
          this.checkHold(entry.seq);
          return this.monitor.apply(backend, entry);
        },
      },
      1,
    );
    this.receiver = receiver;
    this.monitor.newIncarnation(receiver);
    this.connect();
  }

  /** The standby process dies and a new, empty one starts a little later. */
  private restartStandby(): void {
    if (this.healed) return;
    const { faults } = this.rng;
    if (this.receiver !== undefined) {
      this.stats.standbyRestarts++;
      this.disconnect();
      this.receiver.backend?.close(); // the process is gone, its device with it
      this.receiver = undefined;
      this.followed = undefined;
      this.at(this.nowMs + faults.int(1, this.params.standbyRestartDownMaxMs), {
        kind: "standbyStart",
      });
    }
    this.at(this.nowMs + faults.exponential(1000 / this.params.standbyRestartsPerSec), {
      kind: "standbyRestart",
    });
  }

  // ---- the end ----

  /** Faults stop, guests stop sending; a standby that is down is started. */
  private heal(): void {
    this.healed = true;
    this.toStandby.healed = true;
    this.toPrimary.healed = true;
    if (this.receiver === undefined) this.at(this.nowMs, { kind: "standbyStart" });
    else if (!this.linkUp) this.at(this.nowMs, { kind: "reconnect" });
  }

  private quiescent(): boolean {
    const { sender, log, receiver } = this;
    return (
      this.nextStep >= this.steps.length &&
      this.pending.length === 0 &&
      !this.sequencer.mmioPending &&
      this.linkUp &&
      sender.inSync &&
      sender.appliedSeq === log.lastSeq &&
      receiver !== undefined &&
      receiver.appliedSeq === log.lastSeq &&
      this.deviceIdle(this.backend) &&
      this.deviceIdle(receiver.backend)
    );
  }

  /** A backend's digest, hashed on its device: the simulation runs until the device is done. */
  private digestOf(backend: Backend): StateDigest {
    let digest: StateDigest | undefined;
    digestWhenDone(backend, (d) => {
      digest = d;
    });
    while (digest === undefined) {
      const next = this.queue.pop();
      if (next === undefined) throw new SimFailure("a device never finished a digest");
      this.nowMs = next.atMs;
      this.handle(next.event);
      this.pump();
    }
    return digest;
  }

  private deviceIdle(backend: Backend | undefined): boolean {
    const queue = backend?.progress as { readonly outstanding?: number } | undefined;
    return (queue?.outstanding ?? 0) === 0;
  }

  private checkQuiescent(): void {
    const receiver = this.receiver!;
    if (receiver.state !== "replica") {
      throw new SimFailure(`standby is ${receiver.state} at quiescence, not a replica`);
    }
    if (receiver.divergences > 0)
      throw new SimFailure(`standby diverged ${receiver.divergences} times`);
    // A late result lost alone (this link drops single messages; a real stream breaks instead,
    // and the hello drops such checks) is never compared: counted, not a failure.
    this.stats.lateChecksLeftOpen = receiver.openLateChecks + receiver.lateUnchecked;
    if (this.monitor.coveredSeq !== this.log.lastSeq) {
      throw new SimFailure(
        `standby holds up to ${this.monitor.coveredSeq}, log ends at ${this.log.lastSeq}`,
      );
    }
    const mine = this.digestOf(this.backend);
    const theirs = this.digestOf(receiver.backend!);
    if (mine.state !== theirs.state) {
      const which = mine.gpu !== theirs.gpu ? "GPU state" : "session table";
      throw new SimFailure(`replicas differ at seq ${this.log.lastSeq}: ${which}`);
    }
    this.finalDigest = mine.state;
  }

  private describe(): string {
    const r = this.receiver;
    return [
      `issued ${this.nextStep}/${this.steps.length}`,
      `replies pending ${this.pending.length}`,
      `log ${this.log.firstRetainedSeq}..${this.log.lastSeq}`,
      `mmio pending ${this.sequencer.mmioPending}`,
      `link ${this.linkUp ? "up" : "down"}`,
      `sender ${this.sender.state} received ${this.sender.receivedSeq} applied ${this.sender.appliedSeq}`,
      `primary device done ${this.backend.progress.doneSeq(this.log.lastSeq)}`,
      r
        ? `standby #${this.monitor.incarnation} ${r.state} received ${r.receivedSeq} applied ${r.appliedSeq} late open ${r.openLateChecks}`
        : "no standby",
    ].join(", ");
  }

  // ---- helpers ----

  private at(atMs: number, event: SimEvent): void {
    this.queue.push(atMs, event);
  }

  private record(kind: string): void {
    let h = this.trace;
    const t = Math.round(this.nowMs * 1000);
    for (let i = 0; i < kind.length; i++) h = Math.imul(h ^ kind.charCodeAt(i), 0x01000193);
    h = Math.imul(h ^ (t >>> 0), 0x01000193);
    h = Math.imul(h ^ Math.floor(t / 2 ** 32), 0x01000193);
    this.trace = h >>> 0;
  }
}

/** Runs one seeded simulation. */
export function simulate(params: SimParams, onTrace?: (line: string) => void): SimResult {
  return new Simulation(params, onTrace).run();
}
