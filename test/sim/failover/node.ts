// One node of the pair as the simulator runs it: the shipped NodeDriver (packages/common
// node-driver.ts, over the pure NodeMachine) on a simulated process. The epoch file survives a
// crash (everything else is lost); the driver probes the peer at start and decides the role,
// promotes its standby (persisted before it serves), steps its primary down on a higher
// epoch, and adopts higher epochs its standby sees. Role changes run as microtasks after the
// callback that asked for them, as they do in the daemon.
import {
  NodeDriver,
  type NodeNote,
  type PairRole,
  type PeerProbe,
  type PrimaryMessage,
  type StandbyMessage,
  type wire,
} from "@vgpu-ha/common";
import type { BackendOptions, ExecutorFactory } from "@vgpu-ha/gpu-model";
import type { SimRng } from "../rng.js";
import type { Checker } from "./checker.js";
import { failDevice, simDevice } from "./device.js";
import { type EtcdView, SimArbiter, type SimEtcd } from "./etcd.js";
import type { Lineages } from "./lineage.js";
import { type End, guestLink, type Network, type NodeHost } from "./net.js";
import { type FailoverParams, type NodeName, peerOf } from "./params.js";
import { SimPrimary, type Takeover } from "./primary-host.js";
import { SimProcess } from "./process.js";
import type { SimRoleDeps, SimSupervisor } from "./roles.js";
import { describeStandby, endLink, type SimStandby, simStandby } from "./standby-ports.js";
import type { FailoverStats } from "./stats.js";
import type { World } from "./world.js";
import { SimFailure } from "./world.js";

/** How long an unanswered dial waits (grpc-js's minimum connect timeout). */
const DIAL_TIMEOUT_MS = 20_000;
/** How long a node that exited for its device stays down (systemd's RestartSec in deploy/). */
const DEVICE_RESTART_MS = 1000;

type ProbeAnswer = PeerProbe & { readonly nodeId: NodeName };

/** The shipped PrimaryDriver's simulation host (primary-host.ts) as the node driver's primary role. */
class NodePrimaryRole extends SimPrimary {
  serveGuest(stream: End<wire.NodeMessage, wire.GuestMessage>): void {
    this.guests.serve(guestLink(stream));
  }
}

type SimNodeDriver = NodeDriver<
  End<wire.NodeMessage, wire.GuestMessage>,
  Takeover,
  EtcdView,
  NodePrimaryRole,
  SimStandby
>;

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
  /** The device failure plan's wait: true for the first caller only (the plan strikes once). */
  readonly deviceFailureTaken: () => boolean;
}

export class SimNode implements SimSupervisor, NodeHost {
  readonly name: NodeName;
  readonly configured: PairRole;
  /** The epoch file: written (and fsynced) before anything acts on a new epoch. */
  persistedEpoch: number;
  proc: SimProcess | undefined;
  /** etcd mode: this process's etcd client (the leader key, the record). */
  arbiter: SimArbiter | undefined;
  /** The shipped node driver of the running process. */
  driver: SimNodeDriver | undefined;
  private incarnation = 0;
  /** The running process's device (undefined: inline). */
  private executor: ExecutorFactory | undefined;
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

  get role(): SimPrimary | SimStandby | undefined {
    return this.driver?.current.role;
  }

  /** The role was decided (the placeholder standby is gone). */
  get decided(): boolean {
    return this.driver !== undefined && this.driver.current.kind !== "starting";
  }

  epoch(): number {
    return this.driver?.epoch() ?? 0;
  }

  get primary(): SimPrimary | undefined {
    return this.driver?.primary;
  }

  get standby(): SimStandby | undefined {
    return this.driver?.standby;
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
    const deviceSeed = env.params.seed * 4 + this.incarnation * 2 + (this.name === "a" ? 0 : 1);
    this.executor = simDevice(proc, env.params.device[this.name], deviceSeed);
    const arbiter = env.etcd
      ? new SimArbiter(env.etcd, proc, this.name, env.params.lease)
      : undefined;
    this.arbiter = arbiter;
    const mode = env.etcd ? "etcd" : "peer";
    const options = {
      mode,
      configured: this.configured,
      nodeId: this.name,
      leaseMs: env.params.lease.leaseMs,
    } as const;
    const driver: SimNodeDriver = new NodeDriver(options, {
      persist: (epoch) => {
        env.checker.epochPersisted(this.name, this.persistedEpoch, epoch);
        this.persistedEpoch = epoch;
      },
      probePeer: (done) => this.probePeer(proc, done),
      etcd: arbiter,
      roles: {
        primary: (takeover) => new NodePrimaryRole(this.deps(proc), takeover),
        standalone: () => {
          throw new SimFailure("the simulated pair has no standalone node");
        },
        standby: (kept) => {
          const standby = simStandby(this.deps(proc));
          if (kept) {
            kept.backend.trackMmio = false;
            standby.adopt(kept.backend, kept.lastSeq);
          }
          return standby;
        },
      },
      timers: proc,
      defer: (fn) => proc.defer(fn),
      observer: {
        note: (n) => this.noted(n),
        steppingDown: (primary, s) => {
          this.env.checker.steppedDown(primary, s.discarded, s.kept);
          if (s.kept) this.env.stats.stepDownsKeeping++;
          else this.env.stats.stepDownsDiscarding++;
        },
        became: (c) => this.env.note(`${this.name} now ${c.kind} at epoch ${driver.epoch()}`),
      },
      maintenancePaused: () => false,
      adoptMaintenance: () => undefined,
      deviceFailed: (failure) => this.exitForDevice(proc, failure.reason),
    });
    this.driver = driver;
    proc.run(() => driver.start(this.persistedEpoch));
  }

  private noted(n: NodeNote): void {
    const { stats } = this.env;
    switch (n.kind) {
      case "coldStart":
        stats.coldStarts++;
        return;
      case "rejoin":
        stats.rejoinsAsStandby++;
        return;
      case "watchProbe":
        stats.watchProbes++;
        return;
      case "recoveryAwaitingBacklog":
        stats.recoveriesAwaitingBacklog++;
        this.backlogWaitBegan();
        return;
      case "recoveryTakeover":
        stats.recoveryTakeovers++;
        return;
      case "recoveryStart":
        stats.recoveryStarts++;
        return;
      case "promoting":
        this.checkNoBacklog(n.reason);
        if (this.standby?.receiver.state === "snapshot") stats.takeoversMidSnapshot++;
        if (n.reason === "lease_expired") stats.promotions++;
        if (n.reason !== "switchover" || this.arbiter) {
          this.env.checker.promotedOnExpiry(this.name, this.env.peer().primary);
        }
        stats.promotionEpochMax = Math.max(stats.promotionEpochMax, n.epoch);
        return;
      default:
        return;
    }
  }

  /**
   * Issue #14: a standby takes over only once its device has applied everything it received
   * (its old primary may have acknowledged any of it in sync mode).
   */
  private checkNoBacklog(reason: string): void {
    const r = this.standby?.receiver;
    if (r?.backend === undefined) return;
    if (r.backlog > 0) {
      throw new SimFailure(
        `${this.name} promoted (${reason}) with a backlog: received ${r.receivedSeq}, applied ${r.appliedSeq}`,
      );
    }
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
      backendOptions: {
        ...env.backendOptions,
        ...(this.executor ? { executor: this.executor } : {}),
      },
      dialPeer: () => this.dialPeer(proc),
      arbiter: this.arbiter,
      probePeer: (done) => this.probePeer(proc, done),
      note: env.note,
      backlogWaitBegan: () => this.backlogWaitBegan(),
    };
  }

  /**
   * The standby began to wait for its device's backlog before a takeover: the plan's device
   * failure (params deviceFailure) strikes its replica's device, once, `delayMs` later (within
   * the fault window; a wait that ended by then has nothing to strike).
   */
  private backlogWaitBegan(): void {
    const plan = this.env.params.deviceFailure;
    const proc = this.proc;
    if (plan === undefined || this.env.deviceFailureTaken() || proc === undefined) return;
    if (this.env.world.nowMs >= this.env.params.faultWindowMs) return;
    proc.setTimeout(plan.delayMs, () => {
      const standby = this.standby;
      const backend = standby?.receiver.backend;
      if (!standby?.takingOver && standby?.backlog === 0) return; // the wait is over
      if (backend === undefined || !failDevice(backend, "device failed (simulated)")) return;
      this.env.stats.standbyDevicesFailed++;
      this.env.note(`${this.name}'s device failed during a backlog wait`);
    });
  }

  /**
   * The role's device failed (Supervisor.deviceFailed): as vgpud does (device-failure.ts), the
   * node steps down and the process exits, losing its memory; it restarts DEVICE_RESTART_MS
   * later with a fresh device, as systemd restarts it (then resyncs as a standby).
   */
  private exitForDevice(proc: SimProcess, reason: string): void {
    if (this.proc !== proc || !proc.alive) return;
    proc.defer(() => {
      if (this.proc !== proc || !proc.alive) return;
      this.env.stats.deviceFailureExits++;
      this.env.note(`${this.name} exits: ${reason}`);
      // etcd mode: a standby that took the key for a takeover claimed the record's new epoch;
      // the old primary, which lost the key, meets that epoch later and discards its copy (the
      // double failure of docs/failure-model.md: key lost, then the new holder's device).
      const record = this.env.etcd?.recordNow;
      this.crash(record?.primary === this.name ? record.epoch : 0);
      this.env.world.after(DEVICE_RESTART_MS, `restart ${this.name} after its device`, () => {
        if (this.proc === proc) this.boot();
      });
    });
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
      epoch: this.epoch(),
      replica: p.replica,
      appliedSeq: p.appliedSeq,
    };
  }

  /**
   * The process dies, its memory lost. `claimedEpoch`: the epoch it had claimed beyond its own
   * (an etcd key taken for a takeover that never served), which supersedes the old primary's
   * copy of what it held as a newer epoch's does.
   */
  crash(claimedEpoch = 0): void {
    const proc = this.proc;
    if (!proc?.alive) return;
    this.env.stats.crashes++;
    if (this.primary) this.env.stats.crashesOfPrimary++;
    const held = [this.primary?.backend, this.standby?.receiver.backend].filter(
      (b): b is NonNullable<typeof b> => b !== undefined,
    );
    const epoch = Math.max(this.epoch(), claimedEpoch);
    this.env.checker.crashed(this.name, epoch, held, this.primary);
    proc.kill();
    this.env.net.killed(proc);
    this.driver = undefined;
    this.env.note(`${this.name} crashed`);
  }

  pause(): void {
    this.proc?.pause();
  }

  resume(timersFirst: boolean): void {
    this.proc?.resume(timersFirst);
  }

  // ---- the Supervisor the roles see: the driver's ----

  promote(reason: string, force = false, etcdEpoch?: number): void {
    this.driver?.promote(reason, force, etcdEpoch);
  }

  stepDown(theirEpoch: number, reason: string): void {
    this.driver?.stepDown(theirEpoch, reason);
  }

  adoptEpoch(epoch: number): void {
    this.driver?.adoptEpoch(epoch);
  }

  deviceFailed(failure: { readonly reason: string; readonly seq: number }): void {
    this.driver?.deviceFailed(failure);
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

  serveGuest(server: End<wire.NodeMessage, wire.GuestMessage>): void {
    const role = this.role;
    if (role === undefined) throw new SimFailure(`${this.name} served a guest without a role`);
    this.watchSends(server);
    if (role instanceof SimPrimary) role.guests.serve(guestLink(server));
    else role.serveGuest(server);
  }

  /** Every message a node sends carries an epoch it has persisted. */
  watchSends<Out, In>(end: End<Out, In>): void {
    end.onSend = (m) => {
      const epoch = epochOf(m);
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

/** The epoch a message carries: a replication message's, or a guest reply's (Opened, Acks). */
function epochOf(m: unknown): number | undefined {
  const epoch = (m as { epoch?: number }).epoch;
  if (epoch !== undefined) return epoch;
  const value = (m as { kind?: { value?: { epoch?: unknown } } }).kind?.value?.epoch;
  return typeof value === "bigint" ? Number(value) : undefined;
}
