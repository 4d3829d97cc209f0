// The guest stream's messages as the simulator carries them: the domain form of guest.proto's
// GuestMessage and NodeMessage (the daemon converts at its edge; the simulator never encodes).
// Replies carry a tag the protocol does not have: which primary tenure released them and in
// which lease state, for the checker only.
import type { CallResult, ErrorCode, Frame } from "@vgpu-ha/common";

export type GuestMessage =
  | { readonly kind: "open"; readonly tenant: string; readonly resumeSessionId: string }
  | { readonly kind: "frames"; readonly frames: readonly Frame[] };

/** Who released a reply: for the checker, never read by the guest's protocol logic. */
export interface ReleaseTag {
  /** The primary role instance (one per node, epoch and promotion). */
  readonly tenure: number;
  /** Counts the tenure's stretches without the lease: the solo period it was released in. */
  readonly soloPeriod: number;
  /** Released while serving alone (degraded). */
  readonly degraded: boolean;
  /** A partition or a lost message had happened by then (split brain is allowed after). */
  readonly excused: boolean;
}

export type NodeMessage =
  | {
      readonly kind: "opened";
      readonly sessionId: string;
      readonly epoch: number;
      readonly lastFrame: number;
      readonly nodeId: string;
      readonly tag: ReleaseTag;
    }
  | {
      readonly kind: "acks";
      readonly epoch: number;
      readonly ackedThrough: number;
      readonly results: readonly { readonly frame: number; readonly result: CallResult }[];
      readonly tag: ReleaseTag;
    }
  | {
      readonly kind: "error";
      readonly code: ErrorCode;
      readonly message: string;
      readonly redirect: string;
    };
