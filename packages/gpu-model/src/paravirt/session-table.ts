// The session table: per session, the last frame applied and the replies of recent frames,
// so a guest that re-sends after a reconnect or failover gets the original reply instead of a
// second application. Part of the replicated state.
import type { CallResult } from "@vgpu-ha/common/core";
import { ReplyCache } from "./reply-cache.js";

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
  /** frame number → reply, oldest first, evicted by frame number. Written only through remember(). */
  readonly replies = new ReplyCache();
  private replyBytes = 0;

  constructor(id: string, tenant: string) {
    this.id = id;
    this.tenant = tenant;
  }

  /**
   * Caches a reply. The oldest replies go first when the cache holds more than its frame or
   * byte limit, but the newest is always kept (a single reply above the byte limit evicts every
   * older one, never itself). A frame already cached has its reply replaced in place; any other
   * must be above every cached frame (a session applies its frames in order).
   */
  remember(frame: number, result: CallResult, limits: SessionLimits): void {
    if (this.replies.has(frame)) this.replyBytes -= replySize(this.replies.replace(frame, result));
    else this.replies.push(frame, result);
    this.replyBytes += replySize(result);
    while (
      this.replies.size > limits.replyCacheFrames ||
      this.replyBytes > limits.replyCacheBytes
    ) {
      if (this.replies.oldestFrame === frame) break;
      this.replyBytes -= replySize(this.replies.shift());
    }
  }
}

function replySize(result: CallResult): number {
  return result.output.kind === "data" ? result.output.data.byteLength : 0;
}
