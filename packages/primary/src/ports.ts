// The ports the primary role's driver runs over (see common/core/ports.ts for Timers and the
// Supervisor): the daemon implements them with the grpc-js GuestService, gRPC, the etcd client,
// pino and prom-client; the failover simulator with its simulated streams, network and etcd.
// Pure types: no I/O here.
import type { WorkCounters } from "@vgpu-ha/common";

/** Frames applied, replies sent and sessions opened (what a step-down would discard). */
export type GuestWork = Omit<WorkCounters, "lastSeq">;

/**
 * What the guest service asks of the role that hosts it. The role hands these to the guest
 * port's factory (GuestPortFactory) when it builds the port.
 */
export interface GuestHooks {
  /** Whether guests are served now (false: each message is answered NOT_PRIMARY + redirect). */
  readonly serving: () => boolean;
  /**
   * Replies whose entry is at or below this seq may go out now; undefined: every reply (no
   * standby to wait for). Asked at every release.
   */
  readonly replicatedSeq: () => number | undefined;
  /** After each guest message was applied (or a session was closed): send, cut MMIO, release. */
  readonly afterApply: () => void;
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
