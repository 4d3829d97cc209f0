// The ports the primary role's driver runs over (see common/core/ports.ts for Timers and the
// Supervisor): the daemon implements them with the grpc-js GuestService, gRPC, the etcd client,
// pino and prom-client; the failover simulator with its simulated streams, network and etcd.
// Pure types: no I/O here.
import type { Supervisor, WorkCounters } from "@vgpu-ha/common";
import type { Backend, SnapshotSource } from "@vgpu-ha/gpu-model";
import type { EtcdReadView } from "./core/primary-etcd.js";
import type { HelloDecision, PrimaryNotice } from "./core/primary-machine.js";
import type { SenderEvent } from "./core/sender.js";
import type { Sequencer } from "./core/sequencer.js";
import type { PullDecision } from "./core/snapshot-pull.js";

/** Frames applied, replies sent and sessions opened (what a step-down would discard). */
export type GuestWork = Omit<WorkCounters, "lastSeq">;

/**
 * What the guest service asks of the role that hosts it. The role hands these to the guest
 * port's factory (GuestPortFactory) when it builds the port.
 */
export interface GuestHooks {
  /** The role's sequencer: frames are applied (and logged for the standby) through it. */
  readonly sequencer: Sequencer;
  /** Whether guests are served now (false: each message is answered NOT_PRIMARY + redirect). */
  readonly serving: () => boolean;
  /**
   * Replies whose entry is at or below this seq may go out now; undefined: every reply (no
   * standby to wait for). Asked at every release.
   */
  readonly replicatedSeq: () => number | undefined;
  /** After each guest message was applied (or a session was closed): send, cut MMIO, release. */
  readonly afterApply: () => void;
  /** At once after each turn that served guest messages: back-pressure (afterApply is deferred). */
  readonly served?: () => void;
}

/**
 * The guest service as the primary role drives it: serves guest streams of type `S`, holds each
 * reply until `GuestHooks.replicatedSeq` allows it, pauses reading under back-pressure, ends
 * every stream with NOT_PRIMARY when the role stops. The daemon's GuestService implements it
 * over grpc-js streams; the simulator over its simulated streams.
 */
export interface GuestPort<S> {
  /** Serves one guest stream until it ends or the role ends it. */
  serve(stream: S): void;
  /** Sends every held reply `GuestHooks.replicatedSeq` now allows. */
  release(): void;
  /** Stops (true) or resumes reading guest streams: back-pressure or a switchover. */
  setPaused(paused: boolean): void;
  /** Ends every stream with NOT_PRIMARY (redirecting to the peer); held replies are dropped. */
  endAll(message: string): void;
  /** Closes (through the log) at most `max` sessions idle past their limit; a no-op without one. */
  reapIdle(max: number): void;
  /** The highest seq any reply (an ack, a session opened or closed) went out for. */
  readonly releasedSeq: number;
  /** The highest seq of a frame acknowledged to a guest (status: acknowledged seq). */
  readonly ackedSeq: number;
  /** Replies waiting for the standby. */
  readonly heldReplies: number;
  /** Sessions with a stream attached. */
  readonly openStreams: number;
  /** Running totals (never reset): frames applied, replies sent, sessions opened. */
  readonly applied: GuestWork;
}

/** Builds the role's guest port once the role's hooks exist. */
export type GuestPortFactory<S> = (hooks: GuestHooks) => GuestPort<S>;

/** etcd mode: the leader key and cluster record, with callbacks (no Promises: the simulator). */
export interface EtcdPort {
  /** This node holds the leader key (under a live etcd lease, as far as it knows). */
  readonly holding: boolean;
  /** Until when this node may act on its etcd lease (monotonic ms; -Infinity: none). */
  leaseEndMs(): number;
  /** Called once when etcd says the lease is gone. */
  onLost: (() => void) | undefined;
  read(done: (error: Error | undefined, view: EtcdReadView | undefined) => void): void;
  /** Takes the key with the record's new `epoch`, conditioned on `view` (one transaction). */
  acquire(
    view: EtcdReadView,
    epoch: number,
    done: (error: Error | undefined, acquired: boolean) => void,
  ): void;
  /** Names `replica` ("" for none) in the record while this node holds the key. */
  setReplica(
    epoch: number,
    replica: string,
    done: (error: Error | undefined, written: boolean) => void,
  ): void;
  /** Gives the key up (the standby may take it at once). */
  resign(): void;
}

/** Peer mode: the lease thread (heartbeats beside the main loop); absent when off. */
export interface LeaseThreadPort {
  /** A new key for the lease channel (sent in every hello). */
  newKey(): Uint8Array;
  /** Serve the lease channel as primary with `key` at `epoch`. */
  primary(key: Uint8Array, epoch: number): void;
  /** Serve nothing (the role stopped). */
  none(): void;
  /** Renew only while the stream to the peer is up and this loop turns (its watchdog). */
  setRenewing(renewing: boolean): void;
  /** Send time (ms) of the newest heartbeat the standby acknowledged on the channel. */
  ackedSentMs(): number | undefined;
}

/** What the role asks of its node. */
export type PrimarySupervisor = Pick<Supervisor, "epoch" | "stepDown" | "adoptEpoch"> & {
  /** Maintenance mode (vgpuctl pause), carried on heartbeats; absent: never paused. */
  maintenancePaused?(): boolean;
};

/** The observer: logs and metrics in the daemon, stats and the checker in the simulator. */
export interface PrimaryObserver {
  /** The machine's notices (lease and grant changes, etcd record changes, a handover). */
  notice(n: PrimaryNotice, seq: number): void;
  /** Every event of the Sender, before the role reacts to it. */
  senderEvent(e: SenderEvent, seq: number): void;
  /** A snapshot of `backend` for the standby begins. */
  snapshotStarted(source: SnapshotSource, backend: Backend): void;
  /** A replication stream opened by another node was decided (`remote`: its address). */
  hello(decision: HelloDecision, remote: string): void;
  /** A standby's snapshot pull was served or refused (`remote`: its address). */
  snapshotPull?(decision: PullDecision, remote: string): void;
  /** After each guest message was applied (before it is sent on). */
  guestMessage(): void;
  /** An etcd request failed. */
  etcdFailed(error: Error): void;
  /** The switchover hands over at `seq` with `digest`. */
  handingOver(seq: number, digest: string): void;
}
