// The session table: per session, the last frame applied and the replies of recent frames,
// so a guest that re-sends after a reconnect or failover gets the original reply instead of a
// second application. Part of the replicated state.
import type { CallResult } from "@vgpu-ha/common/core";
import Denque from "denque";

export interface SessionLimits {
  /** Replies kept per session (must cover the guest's frames in flight). */
  readonly replyCacheFrames: number;
  /** Bytes of reply data kept per session; the oldest go first. */
  readonly replyCacheBytes: number;
}

export class SessionRecord {
  readonly id: string;
  readonly tenant: string;
  lastFrame = 0;
  readonly contexts = new Set<number>();
  /** frame number → reply, oldest first. Written only through remember(). */
  readonly replies = new Map<number, CallResult>();
  /**
   * The cached frame numbers, oldest first, so eviction takes the oldest in O(1). Iterating
   * `replies` from its start for the oldest would walk the slots of every frame deleted since
   * the Map last rehashed: O(cache size) per call.
   */
  private readonly order = new Denque<number>();
  private replyBytes = 0;

  constructor(id: string, tenant: string) {
    this.id = id;
    this.tenant = tenant;
  }

  /**
   * Caches a reply. The oldest replies go first when the cache holds more than its frame or
   * byte limit, but the newest is always kept (a single reply above the byte limit evicts every
   * older one, never itself). A frame already cached has its reply replaced in place.
   */
  remember(frame: number, result: CallResult, limits: SessionLimits): void {
    const previous = this.replies.get(frame);
    if (previous === undefined) this.order.push(frame);
    else this.replyBytes -= replySize(previous);
    this.replies.set(frame, result);
    this.replyBytes += replySize(result);
    while (
      this.replies.size > limits.replyCacheFrames ||
      this.replyBytes > limits.replyCacheBytes
    ) {
      const oldest = this.order.peekFront()!;
      if (oldest === frame) break;
      this.order.shift();
      this.replyBytes -= replySize(this.replies.get(oldest)!);
      this.replies.delete(oldest);
    }
  }
}

function replySize(result: CallResult): number {
  return result.output.kind === "data" ? result.output.data.byteLength : 0;
}
