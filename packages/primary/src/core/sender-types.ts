// The sending state machine's vocabulary (core/sender.ts): its options, the snapshot stream it
// reads chunks from, its states and the events it reports to the primary role.
import type { ErrorCode, NodeVersion, RefusalReason, SnapshotChunk } from "@vgpu-ha/common/core";

export interface SenderOptions {
  readonly clusterId: string;
  readonly nodeId: string;
  /** The standby's node id (config peer.name): nothing from another is believed. */
  readonly peerName: string;
  /** What this node runs, announced in its hello (absent: this build's protocol, no version). */
  readonly version?: NodeVersion;
  readonly maxBatchEntries: number;
  readonly maxBatchBytes: number;
  readonly maxInflightEntries: number;
  readonly maxInflightBytes: number;
  readonly snapshotWindowChunks: number;
  readonly heartbeatMs: number;
  readonly retransmitMs: number;
  readonly retainBytes: number;
  /**
   * Ask the standby to hold each entry's device work until this node's device has done it
   * (core/release.ts holdsStandbyDevice), and tell it how far that is (deviceDoneSeq).
   */
  readonly holdStandby?: boolean;
  /**
   * The highest seq whose device work this node's device has completed (DeviceProgress.doneSeq);
   * read at each poll while holdStandby, and taken at most up to the log's last seq then (a
   * pending page batch's seq may count as done before its entry exists). Absent: every entry's.
   */
  readonly deviceDoneSeq?: () => number;
}

/** A snapshot being produced (SnapshotSource in gpu-model). */
export interface SnapshotStream {
  /** Higher for each snapshot a Sender starts: the standby takes a lower one for a stale copy. */
  readonly snapshotId: number;
  readonly atSeq: number;
  /** Buffer bytes the snapshot covers, and how many of them the chunks produced so far cover. */
  readonly totalBytes?: number;
  readonly coveredBytes?: number;
  next(): SnapshotChunk | undefined;
  release(): void;
  /**
   * Whether next() has a chunk now (always, on an inline device); absent: always. A device that
   * answers later makes it true again with a progress notification (the driver then polls).
   */
  ready?(): boolean;
  /**
   * A chunk the standby acknowledged on a pull (no longer held here, encoded onto the pull's
   * stream before it could arrive): its memory may be reused for a later chunk. Optional.
   */
  recycle?(chunk: SnapshotChunk): void;
}

export type SenderState = "disconnected" | "hello" | "snapshot" | "streaming";

export type SenderEvent =
  | { readonly kind: "snapshotStarted"; readonly snapshotId: number; readonly atSeq: number }
  | { readonly kind: "snapshotResumed"; readonly snapshotId: number; readonly chunk: number }
  | { readonly kind: "snapshotDone"; readonly snapshotId: number; readonly atSeq: number }
  | { readonly kind: "resumed"; readonly fromSeq: number }
  | { readonly kind: "resync"; readonly reason: string; readonly detail: string }
  | {
      readonly kind: "refused";
      readonly code: ErrorCode;
      readonly message: string;
      /** Set when the other end is not our peer (peer-identity.ts): counted and rate-limited. */
      readonly reason?: RefusalReason;
    }
  | { readonly kind: "higherEpoch"; readonly epoch: number }
  | { readonly kind: "handoverAccepted" }
  | {
      readonly kind: "checkpoint";
      readonly requestId: number;
      readonly seq: number;
      readonly equal: boolean;
      readonly digest: string;
    };
