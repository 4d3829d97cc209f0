// The ports the role drivers run over (TigerBeetle's ReplicaType(…, MessageBus, Storage, Time)):
// the daemon implements them with Node timers, gRPC, the etcd client, pino and prom-client; the
// failover simulator with its simulated processes, network and etcd. Pure types: no I/O here.

import type { GuestMessage, NodeMessage } from "../gen/vgpu/v1/guest_pb.js";

/** The guest API's wire messages, for the cores that take them (types only: nothing loads). */
export type {
  Frame as WireFrame,
  GuestMessage,
  NodeMessage,
  Open as GuestOpen,
} from "../gen/vgpu/v1/guest_pb.js";

/** An armed timer, as the host that armed it knows it. */
export type TimerHandle = object;

/** Timers on the host's clock (Node's in the daemon, the simulated process's in the simulator). */
export interface Timers {
  setTimeout(ms: number, fn: () => void): TimerHandle;
  setInterval(ms: number, fn: () => void): TimerHandle;
  /** Cancels a timer; undefined or an already-fired one is fine. */
  clear(timer: TimerHandle | undefined): void;
}

export interface PeerView {
  readonly nodeId: string;
  readonly role: "primary" | "standby";
  readonly epoch: number;
  /** A standby: an eligible replica (holds the sync grant). */
  readonly replica: boolean;
  /** The last seq its state holds (0: it holds nothing). */
  readonly appliedSeq: number;
}

/** What a role may ask of its node (the supervisor). */
export interface Supervisor {
  /** The node's current epoch. */
  epoch(): number;
  /**
   * A standby whose primary's lease ran out: take over (epoch + 1, persisted first). In etcd
   * mode the standby took the leader key first, and `epoch` is the record's new epoch.
   */
  promote(reason: string, force?: boolean, epoch?: number): void;
  /** A primary that met a higher epoch: become a standby (its solo work is discarded). */
  stepDown(theirEpoch: number, reason: string): void;
  /** A standby that saw a higher epoch from its primary: persist it. */
  adoptEpoch(epoch: number): void;
  /**
   * Asks the peer what it is and holds; `done` gets undefined when it does not answer. A
   * callback, not a Promise: the simulator runs it in simulated time.
   */
  probePeer(done: (peer: PeerView | undefined) => void): void;
  /** Maintenance mode (vgpuctl pause): no automatic takeover; the primary's heartbeats carry it. */
  maintenancePaused(): boolean;
  /** A standby: the maintenance flag its primary's heartbeat carried. */
  adoptMaintenance(paused: boolean): void;
  /**
   * The role's device failed (it completes nothing more): the node can serve no one, so it
   * steps down and exits (vgpud: code 3; restarted, it resyncs as a standby with a fresh
   * device). A standby whose takeover waited for that device's backlog does not take over.
   */
  deviceFailed(failure: { readonly reason: string; readonly seq: number }): void;
}

/**
 * One guest stream as the guest service sees it (a Link of the guest API): wire messages in
 * and out, as protobuf-es objects. The daemon adapts a grpc-js server stream; the simulator
 * carries the objects in memory without encoding them.
 */
export interface GuestLink {
  /** Where the guest connects from (ip:port), for refusal reports. */
  readonly remote: string;
  /** The names of the guest's verified TLS client certificate (none on plaintext). */
  readonly certificateNames: readonly string[];
  /** Writing still reaches the guest (the stream is neither ended nor broken). */
  readonly writable: boolean;
  send(message: NodeMessage): void;
  /** The node's half-close: nothing more is sent on this stream. */
  end(): void;
  /** Stops reading (what the guest sends waits in the transport: flow control). */
  pause(): void;
  resume(): void;
  onMessage(handler: (message: GuestMessage) => void): void;
  /** The guest half-closed: it sends nothing more. */
  onEnd(handler: () => void): void;
  /** The stream broke or was cancelled: nothing more is read or written. */
  onGone(handler: () => void): void;
}
