// What the node (the supervisor) needs of the role it runs, and what a role may ask of the
// node. The node owns the servers and the epoch; a role serves the streams it is handed.
import type * as grpc from "@grpc/grpc-js";
import type {
  Clock,
  Config,
  Logger,
  NodeMetrics,
  PeerChannel,
  ReplicationGauges,
  SessionView,
  StandbyMessage,
  Supervisor,
  TlsFiles,
  wire,
} from "@vgpu-ha/common";
import type { DeviceProgress, StateDigest } from "@vgpu-ha/gpu-model";
import type { PullStream } from "@vgpu-ha/primary";
import type { ReplicationCall } from "@vgpu-ha/standby";
import type { DeviceSetup } from "../device/device-setup.js";
import type { GuestRefusalSink } from "../guest-listener.js";
import type { EtcdArbiter } from "../lease/etcd-arbiter.js";
import type { LeaseThread } from "../lease/lease-thread.js";
import type { Readiness } from "../ops/ops-app.js";
import type { ReplicationRefusals } from "../replication-refusals.js";

export type RoleName = "standalone" | "primary" | "standby";

export type GuestStream = grpc.ServerDuplexStream<wire.GuestMessage, wire.NodeMessage>;

export interface VerifyResult {
  readonly equal: boolean;
  readonly seq: number;
  readonly primary: string;
  readonly standby: string;
}

export type { PeerView, Supervisor } from "@vgpu-ha/common";

export interface RoleDeps {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: NodeMetrics;
  readonly clock: Clock;
  readonly supervisor: Supervisor;
  /** lease.mode etcd: the etcd leader key and cluster record. */
  readonly arbiter: EtcdArbiter | undefined;
  /** How to dial the peer's replication port (mutual TLS when tls is configured). */
  readonly peerChannel?: PeerChannel;
  /** The tls files the peer channel uses (the pages socket dials with them too). */
  readonly peerTls?: TlsFiles;
  /** Counts and logs a guest refused by the guest service (open timeout, auth, cluster). */
  readonly guestRefused?: GuestRefusalSink;
  /** Where replication peers that are not ours are counted and logged. */
  readonly refusals: ReplicationRefusals;
  /** Peer mode: the lease thread (heartbeats beside the main loop); undefined when off. */
  readonly leaseThread?: LeaseThread | undefined;
  /** Follow this device from now on (the node steps down when it fails: device-watch.ts). */
  readonly watchDevice?: (progress: DeviceProgress) => void;
  /** The node's device (device.backend), set up at start; absent: the model as configured. */
  readonly device?: DeviceSetup;
  /** A standby met a primary whose device runs another kernel contract: the node exits 2. */
  readonly contractRefused?: (message: string) => void;
}

export interface Role {
  readonly name: RoleName;
  /** Starts timers and dialing. */
  start(): void;
  /** Ends guest streams (NOT_PRIMARY), links and timers. */
  stop(reason: string): Promise<void>;
  serveGuest(stream: GuestStream): void;
  acceptReplication(call: ReplicationCall): void;
  /** Primary: a standby pulls a snapshot's pages (PullSnapshot); others refuse it. */
  pullSnapshot?(request: StandbyMessage, stream: PullStream, remote: string): void;
  /** For the peer's Probe. */
  probe(): { role: "primary" | "standby"; replica: boolean; appliedSeq: number };
  status(): Record<string, unknown>;
  readiness(): Readiness;
  counts(): {
    sessions: number;
    contexts: number;
    bos: number;
    vramUsed: number;
    vramTotal: number;
  };
  replicationGauges(): ReplicationGauges;
  /** The state digest and the seq it is at. */
  digest(): Promise<{ seq: number; digest: StateDigest } | undefined>;
  /** The guest sessions this node holds (of one tenant when given). */
  sessions(tenant?: string): SessionView[];
  /**
   * Primary, operator: ends a session through the log (`by`: who asked, for the log line);
   * undefined for no such session.
   */
  closeSession?(id: string, by: string): Promise<Record<string, unknown> | undefined>;
  /** Primary: compare both nodes' digests at one seq. */
  verify?(): Promise<VerifyResult>;
  /** Standby, test-only: flip one byte of one buffer. */
  corrupt?(): { context: number; bo: number; offset: number } | undefined;
}
