// The replication stream's messages as domain types (wire form: replication.proto). Every
// message carries the sender's epoch.

import type { Entry, FrameRecord } from "./entries.js";
import { ErrorCode } from "./errors.js";
import type { SnapshotChunk } from "./snapshot.js";

export type PrimaryMessage =
  | {
      readonly kind: "hello";
      readonly epoch: number;
      readonly clusterId: string;
      readonly nodeId: string;
      readonly firstRetainedSeq: number;
      readonly lastSeq: number;
      /** The key of this primary's lease channel (daemon lease thread); absent: none. */
      readonly leaseKey?: Uint8Array;
      /** What the sender runs (core/peer-version.ts); absent: a build that did not say. */
      readonly version?: string;
      readonly protocolVersion?: number;
      /** Its device's kernel contract and what that device is (absent: did not say). */
      readonly kernelContract?: number;
      readonly device?: string;
      /** The history its state belongs to (core/lineage.ts); absent: a build without lineages. */
      readonly lineage?: string;
    }
  | {
      readonly kind: "entries";
      readonly epoch: number;
      readonly entries: readonly Entry[];
      /** Summaries that needed the primary's device, for entries sent earlier or here. */
      readonly lateResults?: readonly LateResult[];
      /**
       * Present: the standby holds each entry's device work until the primary's device has
       * done it, and that device has done every entry's work up to this seq (a holding primary
       * sets it on every batch). Absent: the standby applies on receipt.
       */
      readonly primaryDoneSeq?: number;
    }
  | { readonly kind: "snapshot"; readonly epoch: number; readonly chunk: SnapshotChunk }
  | {
      readonly kind: "heartbeat";
      readonly epoch: number;
      readonly sentUs: number;
      readonly lastSeq: number;
      /** The sync grant (see core/release.ts). */
      readonly syncReplica: boolean;
      /** Maintenance mode: the standby must not take over on its own (absent: false). */
      readonly maintenancePaused?: boolean;
    }
  | {
      readonly kind: "handover";
      readonly epoch: number;
      readonly lastSeq: number;
      readonly digest: string;
    }
  | {
      /** The primary's device failed; these frames' device work was running (never rerun). */
      readonly kind: "deviceFault";
      readonly epoch: number;
      readonly frames: readonly FaultedFrame[];
      readonly reason: string;
    };

/**
 * The part of an entry's result that needed the primary's device, sent once it has run the
 * entry (entries leave before that): a dmaRead's output digest (its call entry left with an
 * empty one), or the state digest at a checkpoint (which left with an empty digest).
 */
export type LateResult =
  | { readonly seq: number; readonly kind: "output"; readonly outputDigest: Uint8Array }
  | { readonly seq: number; readonly kind: "state"; readonly digest: string };
/** A guest frame whose device work was running when a primary's device failed. */
export interface FaultedFrame {
  readonly sessionId: string;
  readonly frame: number;
  /** The entry that carried it. */
  readonly seq: number;
}

/**
 * How a faulted frame is consumed without running (its session records it, its cached reply
 * is DEVICE_FAULT): by a new primary when the guest re-sends it, or by a standby that held it
 * at its takeover.
 */
export function deviceFaultRecord(sessionId: string, frame: number): FrameRecord {
  return {
    sessionId,
    frame,
    code: ErrorCode.DEVICE_FAULT,
    message: `frame ${frame} was running when the previous primary's device failed: not run again`,
  };
}

export interface CheckpointResult {
  readonly requestId: number;
  readonly seq: number;
  readonly equal: boolean;
  readonly digest: string;
}

export type ResyncReason = "gap" | "diverged";

export type StandbyMessage =
  | {
      readonly kind: "hello";
      readonly epoch: number;
      readonly clusterId: string;
      readonly nodeId: string;
      readonly empty: boolean;
      readonly lastAppliedSeq: number;
      /** A snapshot in progress to resume (0 when none) and the chunks it has. */
      readonly snapshotId: number;
      readonly snapshotChunk: number;
      /** What the sender runs (core/peer-version.ts); absent: a build that did not say. */
      readonly version?: string;
      readonly protocolVersion?: number;
      /** This standby pulls snapshot pages on a stream of its own (PullSnapshot). */
      readonly pullsSnapshots?: boolean;
      /** Its device's kernel contract and what that device is (absent: did not say). */
      readonly kernelContract?: number;
      readonly device?: string;
      /** The lineage of the replica it holds (absent: none, or a build without lineages). */
      readonly lineage?: string;
    }
  | {
      readonly kind: "ack";
      readonly epoch: number;
      /** Every entry up to it is received: handed to the standby's device (≥ appliedSeq). */
      readonly receivedSeq: number;
      /** Every entry up to it is applied: the standby's device completed it. */
      readonly appliedSeq: number;
      readonly snapshotId: number;
      readonly snapshotChunk: number;
      readonly heartbeatSentUs: number;
      readonly checkpoints: readonly CheckpointResult[];
      /** The standby accepted a handover and is taking over. */
      readonly handoverAccepted?: boolean;
    }
  | {
      readonly kind: "resync";
      readonly epoch: number;
      readonly reason: ResyncReason;
      readonly fromSeq: number;
      readonly detail: string;
    }
  | {
      readonly kind: "error";
      readonly epoch: number;
      readonly code: ErrorCode;
      readonly message: string;
    };
