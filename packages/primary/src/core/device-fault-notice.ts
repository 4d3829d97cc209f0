// What a primary whose device failed tells its standby: the frames whose device work was
// running (PrimaryMessage "deviceFault"), once, after the entries that carry them, so that the
// standby has those entries when it reads the notice. Part of the sender (pure).
import type { FaultedFrame, PrimaryMessage, ReplicationLog } from "@vgpu-ha/common/core";

/**
 * The guest frame of entry `seq` (the entry whose device work was running), or none: an entry
 * that is not a guest call (stores, sessions), or one no longer retained.
 */
export function framesAt(log: ReplicationLog, seq: number): FaultedFrame[] {
  if (!log.has(seq)) return [];
  const entry = log.read(seq, 1, 0)[0];
  if (entry?.body.kind !== "call") return [];
  return [{ sessionId: entry.body.sessionId, frame: entry.body.frame, seq }];
}

export class DeviceFaultNotice {
  private pending: { frames: readonly FaultedFrame[]; reason: string } | undefined;
  /** The notice left in a message. */
  sent = false;

  /** The device failed while these frames' work was running (empty: none known). */
  raise(frames: readonly FaultedFrame[], reason: string): void {
    this.pending = { frames, reason };
    this.sent = false;
  }

  /** Adds the notice to `out` when the connection streams and every named entry has left. */
  poll(streaming: boolean, sentSeq: number, epoch: number, out: PrimaryMessage[]): void {
    const p = this.pending;
    if (p === undefined || !streaming) return;
    if (p.frames.some((frame) => frame.seq > sentSeq)) return;
    out.push({ kind: "deviceFault", epoch, frames: p.frames, reason: p.reason });
    this.pending = undefined;
    this.sent = true;
  }
}
