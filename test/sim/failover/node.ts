// One node of the pair as the simulator runs it: a mirror of the supervisor in
// packages/daemon/src/node.ts over a simulated process. It owns the epoch file (which survives
// a crash; everything else is lost), starts by probing its peer and deciding its role with
// initialRole, promotes its standby (promotionEpoch, persisted before it serves), steps its
// primary down on a higher epoch (stepDownEpoch; discardedOnStepDown: its state kept after a
// handover, else thrown away), and adopts higher epochs its standby sees. Role changes run
// as microtasks after the callback that asked for them, as on the daemon's promise chain.
import {
  discardedOnStepDown,
  holdingOf,
  initialRole,
  mayAcquire,
  type PairRole,
  type PeerProbe,
  type PrimaryMessage,
  promotionEpoch,
  type StandbyMessage,
  standbyWithoutPrimary,
  stepDownEpoch,
} from "@vgpu-ha/common";
import type { BackendOptions } from "@vgpu-ha/gpu-model";
import { StandbyDriver } from "@vgpu-ha/standby";
import type { SimRng } from "../rng.js";
import type { Checker } from "./checker.js";
import { SimArbiter, type SimEtcd } from "./etcd.js";
import type { GuestMessage, NodeMessage } from "./guest-protocol.js";
import type { Lineages } from "./lineage.js";
import type { End, Network, NodeHost } from "./net.js";
import { type FailoverParams, type NodeName, peerOf } from "./params.js";
import { SimPrimary } from "./primary.js";
import { SimProcess } from "./process.js";
import type { SimRoleDeps, SimSupervisor } from "./roles.js";
import { describeStandby, endLink, type SimStandby, simStandby } from "./standby-ports.js";
import type { FailoverStats } from "./stats.js";
import type { World } from "./world.js";
import { SimFailure } from "./world.js";

/** How long an unanswered dial waits (grpc-js's minimum connect timeout). */
const DIAL_TIMEOUT_MS = 20_000;

type ProbeAnswer = PeerProbe & { readonly nodeId: NodeName };

export interface NodeEnv {
  readonly world: World;
  readonly params: FailoverParams;
  readonly net: Network;
  readonly lineages: Lineages;
  readonly checker: Checker;
  readonly stats: FailoverStats;
  readonly rng: SimRng;
  readonly backendOptions: BackendOptions;
  /** etcd mode: the etcd cluster. */
  readonly etcd: SimEtcd | undefined;
  readonly peer: () => SimNode;
  readonly note: (line: string) => void;
}

export class SimNode implements SimSupervisor, NodeHost {
  readonly name: NodeName;
  readonly configured: PairRole;
  /** The epoch file: written (and fsynced) before anything acts on a new epoch. */
  persistedEpoch: number;
  proc: SimProcess | undefined;
  /** etcd mode: this process's etcd client (the leader key, the record). */
  arbiter: SimArbiter | undefined;
  role: SimPrimary | SimStandby | undefined;
  /** The role was decided (the placeholder standby is gone). */
  decided = false;
  private currentEpoch = 0;
  private incarnation = 0;
  private readonly env: NodeEnv;

  constructor(name: NodeName, env: NodeEnv) {
    this.name = name;
    this.env = env;
    this.configured = name === "a" ? "primary" : "standby";
    this.persistedEpoch = env.params.initialEpoch[name];
  }

  process(): SimProcess | undefined {
    return this.proc?.alive ? this.proc : undefined;
  }

  epoch(): number {
    return this.currentEpoch;
  }

  get primary(): SimPrimary | undefined {
    return this.role instanceof SimPrimary ? this.role : undefined;
  }

  get standby(): SimStandby | undefined {
    return this.role instanceof StandbyDriver && this.decided ? this.role : undefined;
  }

  private deps(proc: SimProcess): SimRoleDeps {
    const { env } = this;
    return {
      node: this.name,
      peer: peerOf(this.name),
      configured: this.configured,
      proc,
      params: env.params,
      supervisor: this,
      net: env.net,
      peerHost: env.peer(),
      lineages: env.lineages,
      checker: env.checker,
      stats: env.stats,
      backendOptions: env.backendOptions,
      dialPeer: () => this.dialPeer(proc),
      arbiter: this.arbiter,
      probePeer: (done) => this.probePeer(proc, done),
      note: env.note,
    };
  }

  private setEpoch(epoch: number): void {
    this.env.checker.epochPersisted(this.name, this.persistedEpoch, epoch);
    this.persistedEpoch = epoch;
    this.currentEpoch = epoch;
  }

  // ---- process lifecycle ----

  /** A new process starts: reads its epoch, probes its peer, takes the role that follows. */
  boot(): void {
    if (this.proc?.alive) return;
    const { env } = this;
    this.incarnation++;
    const proc = new SimProcess(
      env.world,
      `${this.name}${this.incarnation}`,
      this.incarnation,
      { rate: env.params.clockRate[this.name], jitterMs: env.params.timerJitterMs },
      env.rng.fork(this.incarnation * 2 + (this.name === "a" ? 0 : 1)),
    );
    this.proc = proc;
    this.decided = false;
    this.currentEpoch = 0;
    this.arbiter = env.etcd
      ? new SimArbiter(env.etcd, proc, this.name, env.params.lease)
      : undefined;
    // Until the role is decided, a standby that serves nobody (VgpuNode's constructor).
    this.role = simStandby(this.deps(proc));
    proc.run(() => {
      this.currentEpoch = this.persistedEpoch;
      if (this.arbiter) this.decideEtcdRole(proc, this.arbiter);
      else this.probePeer(proc, (peer) => this.decide(proc, peer));
    });
  }

  /** VgpuNode.decideEtcdRole: primary only by taking the leader key (mayAcquire). */
  private decideEtcdRole(proc: SimProcess, arbiter: SimArbiter): void {
    const standby = () => this.settle(proc, "standby");
    arbiter.read((error, view) => {
      if (error || view === undefined) return standby();
      if (view.leader) {
        if (view.leader.epoch > this.currentEpoch) this.setEpoch(view.leader.epoch);
        return standby();
      }
      this.probePeer(proc, (peer) => {
        const decision = mayAcquire({
          me: this.name,
          configuredPrimary: this.configured === "primary",
          leaderPresent: false,
          record: view.record,
          mine: "nothing",
          peer: peer && { nodeId: peer.nodeId, holds: holdingOf(peer) },
          localEpoch: this.currentEpoch,
        });
        if (!decision.acquire) return standby();
        arbiter.acquire(view, decision.epoch, (acquireError, acquired) => {
          if (acquireError || !acquired) return standby();
          this.setEpoch(decision.epoch);
          this.settle(proc, "primary");
        });
      });
    });
  }

  /** etcd mode: the decided role replaces the placeholder (peer mode goes through decide). */
  private settle(proc: SimProcess, role: PairRole): void {
    if (this.proc !== proc || this.decided) return;
    this.role!.stop("role decided");
    this.decided = true;
    if (role === "primary") this.env.stats.coldStarts++;
    this.become(role === "primary" ? new SimPrimary(this.deps(proc)) : simStandby(this.deps(proc)));
  }

  probePeer(proc: SimProcess, done: (peer: ProbeAnswer | undefined) => void): void {
    const deadlineMs = Math.max(1000, this.env.params.lease.leaseMs * 2);
    let answered = false;
    const finish = (peer: ProbeAnswer | undefined) => {
      if (answered) return;
      answered = true;
      stream.close("probe done");
      done(peer);
    };
    const peer = this.env.peer();
    const stream = this.env.net.open<"probe", ProbeAnswer>(
      { name: this.name, proc },
      { name: peer.name, host: peer },
      { timeoutMs: deadlineMs, kind: "probe" },
      (server) => server.onMessage(() => server.send(peer.answerProbe())),
    );
    stream.onMessage((answer) => finish(answer));
    stream.onClose(() => finish(undefined));
    stream.send("probe");
    proc.setTimeout(deadlineMs, () => finish(undefined));
  }

  private answerProbe(): ProbeAnswer {
    const p = this.role!.probe();
    return {
      nodeId: this.name,
      role: p.role,
      epoch: this.currentEpoch,
      replica: p.replica,
      appliedSeq: p.appliedSeq,
    };
  }

  private decide(proc: SimProcess, peer: PeerProbe | undefined): void {
    if (this.proc !== proc) return;
    const decided = initialRole(this.configured, this.currentEpoch, peer);
    if (decided.epoch !== this.currentEpoch) this.setEpoch(decided.epoch);
    this.role!.stop("role decided");
    this.decided = true;
    if (decided.role === "primary") this.env.stats.coldStarts++;
    else if (peer?.role === "primary") this.env.stats.rejoinsAsStandby++;
    this.become(
      decided.role === "primary" ? new SimPrimary(this.deps(proc)) : simStandby(this.deps(proc)),
    );
    // Peer mode only: etcd mode leaves this to the leader key.
    const everyMs = Math.max(1000, this.env.params.lease.leaseMs * 2);
    proc.setInterval(everyMs, () => proc.defer(() => this.watchForPrimary(proc)));
  }

  /** VgpuNode.watchForPrimary: a standby with no primary in sight asks its peer. */
  private watchForPrimary(proc: SimProcess): void {
    const standby = this.role;
    if (!(standby instanceof StandbyDriver) || standby.primaryInSight()) return;
    this.env.stats.watchProbes++;
    this.probePeer(proc, (peer) => {
      if (this.role !== standby || standby.primaryInSight()) return;
      const decided = standbyWithoutPrimary(
        {
          configured: this.configured,
          epoch: this.currentEpoch,
          holdsReplica: standby.holdsReplica,
        },
        peer,
      );
      if (decided.action === "wait") return;
      if (decided.action === "takeOver") {
        this.env.stats.recoveryTakeovers++;
        this.adoptEpoch(decided.epoch - 1);
        this.promote("recovery", true);
        return;
      }
      this.env.stats.recoveryStarts++;
      this.setEpoch(decided.epoch);
      standby.stop("starting the pair");
      this.become(new SimPrimary(this.deps(proc)));
    });
  }

  private become(role: SimPrimary | SimStandby): void {
    this.role = role;
    role.start();
    const name = role instanceof SimPrimary ? role.name : "standby";
    this.env.note(`${this.name} now ${name} at epoch ${this.currentEpoch}`);
  }

  crash(): void {
    const proc = this.proc;
    if (!proc?.alive) return;
    this.env.stats.crashes++;
    if (this.primary) this.env.stats.crashesOfPrimary++;
    const held = [this.primary?.backend, this.standby?.receiver.backend].filter(
      (b): b is NonNullable<typeof b> => b !== undefined,
    );
    this.env.checker.crashed(this.name, this.currentEpoch, held, this.primary);
    proc.kill();
    this.env.net.killed(proc);
    this.role = undefined;
    this.env.note(`${this.name} crashed`);
  }

  pause(): void {
    this.proc?.pause();
  }

  resume(timersFirst: boolean): void {
    this.proc?.resume(timersFirst);
  }

  // ---- the Supervisor interface ----

  promote(reason: string, force = false, etcdEpoch?: number): void {
    const proc = this.proc!;
    proc.defer(() => {
      const standby = this.role;
      if (!(standby instanceof StandbyDriver) || !this.decided) return;
      const takeover = standby.takeover(force);
      if (!takeover) return;
      const epoch = etcdEpoch ?? promotionEpoch(this.currentEpoch, standby.receiver.epoch);
      this.setEpoch(epoch); // persisted before serving as primary
      standby.stop("promoted");
      if (reason === "lease_expired") this.env.stats.promotions++;
      if (reason !== "switchover" || this.arbiter) {
        this.env.checker.promotedOnExpiry(this.name, this.env.peer().primary);
      }
      this.env.stats.promotionEpochMax = Math.max(this.env.stats.promotionEpochMax, epoch);
      const primary = new SimPrimary(this.deps(proc), takeover);
      this.become(primary);
      // Guests that arrived while it promoted waited for this role.
      for (const stream of standby.takeParked()) {
        this.watchSends(stream);
        primary.guests.serve(stream);
      }
    });
  }

  stepDown(theirEpoch: number, reason: string): void {
    const proc = this.proc!;
    proc.defer(() => {
      const primary = this.role;
      if (!(primary instanceof SimPrimary)) return;
      const kept = primary.handedOver();
      const discarded = discardedOnStepDown(kept !== undefined, primary.soloWork());
      this.setEpoch(stepDownEpoch(this.currentEpoch, theirEpoch));
      primary.stop(`stepping down: ${reason}`);
      this.arbiter?.resign(); // etcd mode: a standby holds no key
      this.env.checker.steppedDown(primary, discarded, kept !== undefined);
      const standby = simStandby(this.deps(proc));
      if (kept) {
        this.env.stats.stepDownsKeeping++;
        kept.backend.trackMmio = false;
        standby.adopt(kept.backend, kept.lastSeq);
      } else {
        this.env.stats.stepDownsDiscarding++;
      }
      this.become(standby);
      primary.steppedDown();
    });
  }

  adoptEpoch(epoch: number): void {
    if (epoch > this.currentEpoch) this.setEpoch(epoch);
  }

  // ---- streams handed to the role ----

  private dialPeer(proc: SimProcess): End<PrimaryMessage, StandbyMessage> {
    const peer = this.env.peer();
    const client = this.env.net.open<PrimaryMessage, StandbyMessage>(
      { name: this.name, proc },
      { name: peer.name, host: peer },
      { timeoutMs: DIAL_TIMEOUT_MS, kind: "replication" },
      (server) => peer.acceptReplication(server),
    );
    this.watchSends(client);
    return client;
  }

  acceptReplication(server: End<StandbyMessage, PrimaryMessage>): void {
    const role = this.role;
    if (role === undefined) throw new SimFailure(`${this.name} accepted a stream without a role`);
    // A standby answers with a new primary's epoch before it persists it (harmless: it does
    // not serve on it); what a primary sends is checked.
    if (role instanceof SimPrimary) this.watchSends(server);
    if (role instanceof SimPrimary) role.acceptReplication(server);
    else role.acceptLink(endLink(server));
  }

  serveGuest(server: End<NodeMessage, GuestMessage>): void {
    const role = this.role;
    if (role === undefined) throw new SimFailure(`${this.name} served a guest without a role`);
    this.watchSends(server);
    if (role instanceof SimPrimary) role.guests.serve(server);
    else role.serveGuest(server);
  }

  /** Every message a node sends carries an epoch it has persisted. */
  watchSends<Out, In>(end: End<Out, In>): void {
    end.onSend = (m) => {
      const epoch = (m as { epoch?: number }).epoch;
      if (epoch !== undefined) this.env.checker.sent(this.name, epoch, this.persistedEpoch);
    };
  }

  /** Asks the primary for a planned switchover; the reason it was refused, if it was. */
  switchover(settled: (outcome: string) => void): string | undefined {
    const primary = this.primary;
    if (primary === undefined || this.proc?.state !== "running") return "not a running primary";
    let refusal: string | undefined;
    this.proc.run(() => {
      refusal = primary.switchover(settled);
    });
    return refusal;
  }

  describe(): string {
    const state = this.proc?.alive ? this.proc.state : "down";
    const role =
      this.role === undefined
        ? "-"
        : !this.decided
          ? "starting"
          : this.role instanceof SimPrimary
            ? this.role.describe()
            : describeStandby(this.role);
    return `${this.name}[${state} e${this.persistedEpoch} ${role}]`;
  }
}
