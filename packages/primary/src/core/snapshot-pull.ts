// Whether a standby's snapshot pull (PullSnapshot) is served: the request is the standby's
// hello, checked as the replication stream's is (our peer of our cluster, a compatible
// version), then at this primary's epoch exactly, then naming the snapshot the Sender is sending
// now from a chunk it still holds. Pure: the shell (snapshot-outlet.ts) holds the stream.
import {
  ErrorCode,
  helloRefusal,
  type RefusalReason,
  type SnapshotChunk,
  type StandbyMessage,
} from "@vgpu-ha/common/core";
import type { Sender } from "./sender.js";

export type PullDecision =
  | {
      readonly kind: "serve";
      readonly snapshotId: number;
      /** Chunks already produced from the requested one on, to write first. */
      readonly chunks: readonly SnapshotChunk[];
    }
  | {
      readonly kind: "refuse";
      readonly code: ErrorCode;
      readonly message: string;
      /** Set when the other end is not our peer (peer-identity.ts): counted as such. */
      readonly reason?: RefusalReason;
    };

export function decidePull(sender: Sender, request: StandbyMessage): PullDecision {
  if (request.kind !== "hello") {
    return { kind: "refuse", code: ErrorCode.MALFORMED, message: "a pull must be a hello" };
  }
  const o = sender.options;
  const who = helloRefusal(
    { clusterId: o.clusterId, nodeId: o.nodeId, peerName: o.peerName, version: o.version },
    request,
  );
  if (who !== null) {
    return { kind: "refuse", code: who.code, message: who.message, reason: who.reason };
  }
  // Only the epoch this primary streams at: an older one is a stale standby, a newer one is
  // news for the replication stream (where a higher epoch makes this primary step down).
  if (request.epoch !== sender.epoch) {
    return {
      kind: "refuse",
      code: ErrorCode.STALE_EPOCH,
      message: `pull at epoch ${request.epoch}, the primary's is ${sender.epoch}`,
    };
  }
  const chunks = sender.snapshotChunksFrom(request.snapshotId, request.snapshotChunk);
  if (chunks === undefined) {
    const now = sender.snapshotProgress;
    const sending = now ? `snapshot ${now.snapshotId} from chunk ${now.chunksAcked}` : "none";
    return {
      kind: "refuse",
      code: ErrorCode.SNAPSHOT_STALE,
      message: `pull of snapshot ${request.snapshotId} chunk ${request.snapshotChunk}; sending ${sending}`,
    };
  }
  return { kind: "serve", snapshotId: request.snapshotId, chunks };
}
