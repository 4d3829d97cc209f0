// The node (supervisor) driver: the NodeMachine (core/node-machine.ts) over ports — the epoch
// store, the peer probe, etcd, timers, a deferral (role changes run after the callback that
// asked for them) and a role factory — so the daemon (packages/daemon/src/node.ts) and the
// failover simulator run the same node. It does not know how roles are built: the factory
// makes the primary (from a takeover or afresh) and the standby (empty or keeping a state).
import type { ClusterRecord } from "./core/etcd-lease.js";
import type { DiscardedWork } from "./core/failover.js";
import {
  type NodeAction,
  NodeMachine,
  type NodeMachineOptions,
  type NodeNote,
  type RoleState,
  type StandbyView,
  type StepDown,
} from "./core/node-machine.js";
import type { PeerView, Supervisor, TimerHandle, Timers } from "./core/ports.js";

/** What the node asks of any role it runs. */
export interface NodeRole<G> {
  start(): void;
  /** Ends its streams and timers (a Promise some roles return is not waited for). */
  stop(reason: string): unknown;
  probe(): { role: "primary" | "standby"; replica: boolean; appliedSeq: number };
  serveGuest(stream: G): void;
}

export interface NodePrimary<G, T> extends NodeRole<G> {
  /** After a completed handover: the state it keeps (equal to the new primary's). */
  handedOver(): T | undefined;
  /** What stepping down now would discard. */
  soloWork(): DiscardedWork;
  /** Told once the standby that replaces it has started. */
  steppedDown(): void;
}

export interface NodeStandby<G, T> extends NodeRole<G> {
  /** The replica to serve with (undefined: not eligible, unless forced). */
  takeover(force: boolean): T | undefined;
  /** The highest epoch its receiver has seen. */
  seenEpoch(): number;
  primaryInSight(): boolean;
  readonly holdsReplica: boolean;
  /** A takeover is decided and waits for the device's backlog (absent: never). */
  readonly takingOver?: boolean;
  /** Entries received and not yet applied by its device (absent: none; StandbyView). */
  readonly backlog?: number;
  /** Guests parked during the promotion, for the new primary. */
  takeParked(): G[];
}

/** Builds the roles; the node passes itself as their Supervisor. */
export interface RoleFactory<G, T, P extends NodePrimary<G, T>, S extends NodeStandby<G, T>> {
  /** A primary, from the standby's replica when `takeover` is given, else afresh. */
  primary(takeover: T | undefined): P;
  /** A standalone node's role (no peer). */
  standalone(): P;
  /** A standby, keeping `kept` (a primary's state after a handover) or empty. */
  standby(kept: T | undefined): S;
}

/** etcd mode, at start: read the key, take it (callbacks: the simulator has no Promises). */
export interface NodeEtcd<V> {
  read(done: (error: Error | undefined, view: V | undefined) => void): void;
  acquire(
    view: V,
    epoch: number,
    done: (error: Error | undefined, acquired: boolean) => void,
  ): void;
  /** Gives the key up (a standby holds none). */
  resign(): void;
}

/** What the node reads of the leader key and the record at start. */
export interface EtcdViewOf {
  readonly leader: { readonly epoch: number } | undefined;
  readonly record: ClusterRecord | undefined;
}

export type CurrentRole<P, S> =
  | { readonly kind: "starting"; readonly role: S }
  | { readonly kind: "standalone" | "primary"; readonly role: P }
  | { readonly kind: "standby"; readonly role: S };

/** What the node tells the world: logs, metrics and history, or the simulator's checks. */
export interface NodeObserver<P, S> {
  /** The epoch was written (after the store's write returned). */
  persisted?(epoch: number): void;
  note?(note: NodeNote, current: CurrentRole<P, S>): void;
  /** A role change is about to stop `from` (history wants what it held). */
  changing?(
    to: "standalone" | "primary" | "standby",
    reason: string,
    from: CurrentRole<P, S>,
  ): void;
  /** A primary stopped and stepping down (its state as it stopped); `to`: the history reason. */
  steppingDown?(primary: P, stepDown: StepDown, to: string): void;
  /** The new role started. */
  became?(current: CurrentRole<P, S>, reason: string): void;
}

export interface NodePorts<
  G,
  T,
  V extends EtcdViewOf,
  P extends NodePrimary<G, T>,
  S extends NodeStandby<G, T>,
> {
  /** Writes (and fsyncs) the epoch; returns only once it is on disk. */
  readonly persist: (epoch: number) => void;
  readonly probePeer: (done: (peer: PeerView | undefined) => void) => void;
  readonly etcd: NodeEtcd<V> | undefined;
  readonly roles: RoleFactory<G, T, P, S>;
  readonly timers: Timers;
  /** Runs `fn` after the current callback (a microtask). */
  readonly defer: (fn: () => void) => void;
  readonly observer: NodeObserver<P, S>;
  readonly maintenancePaused: () => boolean;
  readonly adoptMaintenance: (paused: boolean) => void;
  /**
   * The role's device failed: the host steps the node down and ends the process (the daemon:
   * device-failure.ts, exit 3; the simulator: the process exits and restarts later).
   */
  readonly deviceFailed: (failure: { readonly reason: string; readonly seq: number }) => void;
}

export class NodeDriver<
  G,
  T,
  V extends EtcdViewOf,
  P extends NodePrimary<G, T>,
  S extends NodeStandby<G, T>,
> implements Supervisor
{
  readonly machine: NodeMachine;
  private readonly ports: NodePorts<G, T, V, P, S>;
  current: CurrentRole<P, S>;
  private watchTimer: TimerHandle | undefined;
  private etcdView: V | undefined;
  /** The standby's replica, taken for the promotion under way. */
  private takeover: T | undefined;
  private onDecided: (() => void) | undefined;

  constructor(options: NodeMachineOptions, ports: NodePorts<G, T, V, P, S>) {
    this.machine = new NodeMachine(options);
    this.ports = ports;
    // Until start() decides, a standby that serves nobody (not started).
    this.current = { kind: "starting", role: ports.roles.standby(undefined) };
  }

  /** The process starts with the epoch read from disk; `decided` runs once a role is chosen. */
  start(epochRead: number, decided?: () => void): void {
    this.onDecided = decided;
    this.run(this.machine.start(epochRead));
  }

  /** The node shuts down: no more role changes; the current role is stopped. */
  stop(reason: string): unknown {
    this.machine.stop();
    this.ports.timers.clear(this.watchTimer);
    return this.current.role.stop(reason);
  }

  get primary(): P | undefined {
    const c = this.current;
    return c.kind === "primary" ? c.role : undefined;
  }

  get standby(): S | undefined {
    const c = this.current;
    return c.kind === "standby" ? c.role : undefined;
  }

  // ---- Supervisor ----

  epoch(): number {
    return this.machine.epoch;
  }

  promote(reason: string, force = false, etcdEpoch?: number): void {
    this.ports.defer(() => {
      const standby = this.standby;
      this.takeover = standby?.takeover(force);
      const view = standby && { ...this.standbyView(standby), canTakeOver: !!this.takeover };
      this.run(this.machine.promote(reason, view, etcdEpoch));
      this.takeover = undefined;
    });
  }

  stepDown(theirEpoch: number, reason: string, why = "higher_epoch"): void {
    this.ports.defer(() => {
      const p = this.primary;
      const facts = p && { handedOver: p.handedOver() !== undefined, solo: p.soloWork() };
      this.run(this.machine.stepDown(theirEpoch, reason, why, facts));
    });
  }

  adoptEpoch(epoch: number): void {
    this.run(this.machine.adoptEpoch(epoch));
  }

  probePeer(done: (peer: PeerView | undefined) => void): void {
    this.ports.probePeer(done);
  }

  maintenancePaused(): boolean {
    return this.ports.maintenancePaused();
  }

  adoptMaintenance(paused: boolean): void {
    this.ports.adoptMaintenance(paused);
  }

  deviceFailed(failure: { readonly reason: string; readonly seq: number }): void {
    this.ports.deviceFailed(failure);
  }

  /** Operator: the standby drops its replica for a fresh snapshot (after the current callback). */
  reinit(): void {
    this.ports.defer(() => this.run(this.machine.reinit()));
  }

  /** Runs `fn` once the role changes asked for so far have run. */
  afterChanges(fn: () => void): void {
    this.ports.defer(fn);
  }

  // ---- the actions ----

  private standbyView(s: S): StandbyView {
    return {
      primaryInSight: s.primaryInSight(),
      holdsReplica: s.holdsReplica,
      seenEpoch: s.seenEpoch(),
      canTakeOver: true,
      takingOver: s.takingOver === true,
      backlog: s.backlog ?? 0,
    };
  }

  private currentStandbyView(): StandbyView | undefined {
    const s = this.standby;
    return s && this.standbyView(s);
  }

  private run(actions: readonly NodeAction[]): void {
    for (const a of actions) this.act(a);
  }

  private act(a: NodeAction): void {
    const { ports, machine } = this;
    switch (a.kind) {
      case "persist":
        ports.persist(a.epoch);
        ports.observer.persisted?.(a.epoch);
        return;
      case "note":
        ports.observer.note?.(a.note, this.current);
        return;
      case "probePeer": {
        const asked = this.current.role;
        ports.probePeer((peer) => {
          // A standby that is no longer the one that asked has nothing to act on.
          const view = this.current.role === asked ? this.currentStandbyView() : undefined;
          this.run(machine.peerProbed(peer, view, ports.maintenancePaused()));
        });
        return;
      }
      case "etcdRead":
        ports.etcd!.read((error, view) => {
          this.etcdView = view;
          this.run(machine.etcdRead(error ?? view ?? new Error("etcd: no answer")));
        });
        return;
      case "etcdAcquire":
        ports.etcd!.acquire(this.etcdView!, a.epoch, (error, acquired) =>
          this.run(machine.etcdAcquired(error ?? acquired)),
        );
        return;
      case "promote":
        this.promote(a.reason, a.force);
        return;
      case "watchEvery":
        ports.timers.clear(this.watchTimer);
        this.watchTimer = ports.timers.setInterval(a.ms, () =>
          ports.defer(() => this.run(machine.watch(this.currentStandbyView()))),
        );
        return;
      case "become":
        this.become(a.role, a.reason, a.stopReason, a.state, a.stepDown);
        return;
    }
  }

  /** Stops the current role, then starts the next one (see NodeAction "become"). */
  private become(
    to: "standalone" | "primary" | "standby",
    reason: string,
    stopReason: string,
    state: RoleState,
    stepDown: StepDown | undefined,
  ): void {
    const { ports } = this;
    const from = this.current;
    const kept = stepDown && from.kind === "primary" ? from.role.handedOver() : undefined;
    ports.observer.changing?.(to, reason, from);
    from.role.stop(stopReason);
    if (stepDown && from.kind === "primary") {
      ports.etcd?.resign(); // etcd mode: a standby holds no key
      ports.observer.steppingDown?.(from.role, stepDown, reason);
    }
    this.current = this.create(to, state, kept);
    this.current.role.start();
    ports.observer.became?.(this.current, reason);
    if (from.kind === "standby" && this.current.kind === "primary" && state === "takeover") {
      // Guests that arrived while it promoted waited for this role.
      for (const stream of from.role.takeParked()) this.current.role.serveGuest(stream);
    }
    if (stepDown && from.kind === "primary") from.role.steppedDown();
    if (from.kind === "starting") {
      const decided = this.onDecided;
      this.onDecided = undefined;
      decided?.();
    }
  }

  private create(
    to: "standalone" | "primary" | "standby",
    state: RoleState,
    kept: T | undefined,
  ): CurrentRole<P, S> {
    const { roles } = this.ports;
    if (to === "standalone") return { kind: "standalone", role: roles.standalone() };
    if (to === "standby")
      return { kind: "standby", role: roles.standby(state === "kept" ? kept : undefined) };
    return {
      kind: "primary",
      role: roles.primary(state === "takeover" ? this.takeover : undefined),
    };
  }
}
