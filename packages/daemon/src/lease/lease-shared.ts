// The memory the main thread and the lease thread share: one BigInt64Array of microseconds and
// counters, each slot written by one side only (Atomics, so reads never tear). Main → worker
// changes of role travel as messages; `generation` tells the main thread whether the worker's
// figures already belong to the role it last announced.

export const Slot = {
  /** main: when its loop last turned (µs, process-wide monotonic clock). */
  mainProgressUs: 0,
  /** main: 1 while it wants the lease renewed (primary: its stream to the peer is up). */
  renewing: 1,
  /** main: the generation of its last role message. */
  generation: 2,
  /** worker: the generation it has applied (its figures below belong to it). */
  workerGeneration: 3,
  /** worker (primary): the send time of the newest acknowledged heartbeat (µs; 0 none). */
  ackedSentUs: 4,
  /** worker (standby): when it last took a heartbeat of its primary (µs; 0 none). */
  heardUs: 5,
  /** worker: datagrams by kind, for metrics. */
  heartbeatsSent: 6,
  acksTaken: 7,
  heartbeatsTaken: 8,
  refused: 9,
  /** worker: 1 once its socket is bound and it serves. */
  up: 10,
  /** worker (etcd mode): until when its keepalives say the etcd lease holds (µs; 0 none). */
  etcdEndUs: 11,
  /** worker (etcd mode): keepalives answered. */
  etcdAnswers: 12,
} as const;
export const SLOT_COUNT = 13;

/** Process-wide monotonic microseconds (the same clock in every thread). */
export function monotonicUs(): bigint {
  return process.hrtime.bigint() / 1000n;
}

/** What the main thread tells the lease thread. */
export type LeaseRoleMessage =
  | {
      readonly kind: "primary";
      readonly generation: number;
      readonly key: Uint8Array;
      readonly epoch: number;
    }
  | {
      readonly kind: "standby";
      readonly generation: number;
      readonly key: Uint8Array;
      readonly epoch: number;
    }
  | { readonly kind: "none"; readonly generation: number }
  /** etcd mode: keep this etcd lease alive (the node holds the leader key under it). */
  | { readonly kind: "etcd"; readonly generation: number; readonly leaseId: string }
  | { readonly kind: "close" };

/** What the lease thread is started with. */
export interface LeaseWorkerData {
  readonly shared: SharedArrayBuffer;
  /** peer: heartbeats over UDP; etcd: keepalives of the leader key's etcd lease. */
  readonly mode: "peer" | "etcd";
  readonly etcd?: {
    readonly endpoints: readonly string[];
    readonly keepaliveMs: number;
    readonly requestTimeoutMs: number;
    readonly driftMarginMs: number;
  };
  /** Where it listens for its peer's heartbeats (the replication host and port, over UDP). */
  readonly bindHost: string;
  readonly bindPort: number;
  /** Where it sends heartbeats while primary. */
  readonly peerHost: string | undefined;
  readonly peerPort: number | undefined;
  readonly heartbeatMs: number;
  readonly watchdogMs: number;
}
