// What the standby driver runs over, beside common's Timers and Supervisor (core/ports.ts):
// the daemon implements these with the etcd client, gRPC guest streams and pino; the failover
// simulator with its simulated etcd, streams and counters. Callbacks, not Promises: the
// simulator drives them in simulated time.
import type { NodeEtcd, PrimaryMessage } from "@vgpu-ha/common";
import type { Backend } from "@vgpu-ha/gpu-model";
import type { ReceiverEvent } from "./core/receiver.js";
import type { StandbyNote } from "./core/standby-machine.js";

/** etcd mode: the leader key and the cluster record, as the standby reads and takes them. */
export type StandbyEtcd<V> = Pick<NodeEtcd<V>, "read" | "acquire">;

/** A standby's guest port: guests are parked during a promotion, else refused. */
export interface StandbyGuests<G> {
  /** Stops reading the stream: its frames wait, buffered, for the primary role. */
  pause(stream: G): void;
  /** NOT_PRIMARY, naming the primary's guest address ("" when unknown), and the end. */
  refuse(stream: G, redirect: string): void;
}

/** What the standby tells the world: log lines and metrics, or the simulator's checks. */
export interface StandbyObserver {
  note?(note: StandbyNote): void;
  /** A message from the primary was stepped (before its receiver events are handled). */
  stepped?(message: PrimaryMessage): void;
  /**
   * A receiver event; `replaced`: the replica a completed snapshot replaced, or the foreign one
   * dropped (foreignReplica), if any.
   */
  receiverEvent?(event: ReceiverEvent, replaced: Backend | undefined): void;
}

/** What StandbyLink logs (pino's Logger fits). */
export interface LinkLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}
