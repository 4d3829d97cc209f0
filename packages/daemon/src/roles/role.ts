// What the node needs of the role it runs: start/stop, state for status, readiness and
// metrics, and the admin actions the role supports.
import type { ReplicationGauges } from "@vgpu-ha/common";
import type { StateDigest } from "@vgpu-ha/gpu-model";
import type { Readiness } from "../ops/ops-app.js";

export type RoleName = "standalone" | "primary" | "standby";

export interface RoleAddresses {
  readonly guest: string;
  readonly replication?: string;
}

export interface VerifyResult {
  readonly equal: boolean;
  readonly seq: number;
  readonly primary: string;
  readonly standby: string;
}

export interface Role {
  readonly name: RoleName;
  start(): Promise<RoleAddresses>;
  stop(): Promise<void>;
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
  digest(): { seq: number; digest: StateDigest } | undefined;
  /** Primary: compare both nodes' digests at one seq. */
  verify?(): Promise<VerifyResult>;
  /** Standby, test-only: flip one byte of one buffer. */
  corrupt?(): { context: number; bo: number; offset: number } | undefined;
}

export const NO_REPLICATION: ReplicationGauges = {
  lastSeq: 0,
  appliedSeq: 0,
  acknowledgedSeq: 0,
  lagEntries: 0,
  lagBytes: 0,
  lagSeconds: 0,
  connected: false,
  snapshotInProgress: false,
  eligible: false,
};
