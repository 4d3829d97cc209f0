// What the simulated roles need of their node and of the simulation (the daemon's RoleDeps
// and Supervisor, plus the checker's observation points).
import {
  createLogger,
  createMetrics,
  idleGauges,
  type Logger,
  type NodeMetrics,
  type PairRole,
  type PeerProbe,
  type PrimaryMessage,
  type StandbyMessage,
} from "@vgpu-ha/common";
import type { BackendOptions } from "@vgpu-ha/gpu-model";
import type { Checker } from "./checker.js";
import type { SimArbiter } from "./etcd.js";
import type { Lineages } from "./lineage.js";
import type { End, Network, NodeHost } from "./net.js";
import type { FailoverParams, NodeName } from "./params.js";
import type { SimProcess } from "./process.js";
import type { FailoverStats } from "./stats.js";

/** The node (supervisor) as a role sees it: the daemon's Supervisor interface. */
export interface SimSupervisor {
  epoch(): number;
  /** etcd mode: `epoch` is the record's new one, the key already taken. */
  promote(reason: string, force?: boolean, epoch?: number): void;
  stepDown(theirEpoch: number, reason: string): void;
  adoptEpoch(epoch: number): void;
  /** The role's device failed: the node exits (and restarts later, as systemd would). */
  deviceFailed(failure: { readonly reason: string; readonly seq: number }): void;
}

export interface SimRoleDeps {
  readonly node: NodeName;
  readonly peer: NodeName;
  /** The role this node is configured with (it starts the pair when no state survives). */
  readonly configured: PairRole;
  readonly proc: SimProcess;
  readonly params: FailoverParams;
  readonly supervisor: SimSupervisor;
  readonly net: Network;
  readonly peerHost: NodeHost;
  readonly lineages: Lineages;
  readonly checker: Checker;
  readonly stats: FailoverStats;
  /** This node's backend options (its own device seed). */
  readonly backendOptions: BackendOptions;
  /** Opens a replication stream to the peer's replication port. */
  readonly dialPeer: () => End<PrimaryMessage, StandbyMessage>;
  /** etcd mode: this node's etcd client. */
  readonly arbiter: SimArbiter | undefined;
  /** Supervisor.probePeer: what the peer is and holds (undefined: no answer). */
  readonly probePeer: (
    done: (peer: (PeerProbe & { readonly nodeId: NodeName }) | undefined) => void,
  ) => void;
  /** A line for --verbose traces of role changes. */
  readonly note: (line: string) => void;
  /** The standby began to wait for its device's backlog before a takeover (device failure plan). */
  readonly backlogWaitBegan: () => void;
}

/** The replication stream's cluster id in the simulation. */
export const CLUSTER = "sim";

/** The token every simulated guest presents (each node knows the workload's tenants). */
export const GUEST_TOKEN = "sim-guest-token";

let observability: { metrics: NodeMetrics; log: Logger } | undefined;

/**
 * Metrics and a logger for the shipped role code: one silent logger and one registry for the
 * whole simulator (nothing reads them; the checker observes through its own hooks).
 */
export function simObservability(): { metrics: NodeMetrics; log: Logger } {
  observability ??= {
    metrics: createMetrics(idleGauges("primary"), { processMetrics: false }),
    log: createLogger({ level: "silent", nodeId: "sim" }),
  };
  return observability;
}
