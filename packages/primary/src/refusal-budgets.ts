// Each tenant's budget of refused frames (token buckets on the node's monotonic clock): past it,
// the tenant's streams wait for it to refill before more of their frames are served.
import { TokenBucket } from "./core/token-bucket.js";

/** A tenant out of refusal budget waits until it has this long's worth of it again. */
const REFILL_BATCH_MS = 50;

export class RefusalBudgets {
  private readonly limits: { readonly perSecond: number; readonly burst: number } | undefined;
  private readonly nowMs: () => number;
  private readonly buckets = new Map<string, TokenBucket>();

  /** No limits: every tenant may cause refusals without end. */
  constructor(
    limits: { readonly perSecond: number; readonly burst: number } | undefined,
    nowMs: () => number,
  ) {
    this.limits = limits;
    this.nowMs = nowMs;
  }

  /** The tenant has no refusal left now. */
  out(tenant: string): boolean {
    const b = this.bucketOf(tenant);
    return b !== undefined && !b.has(this.nowMs());
  }

  /** Counts one refused frame; false once the tenant's budget is spent. */
  take(tenant: string): boolean {
    return this.bucketOf(tenant)?.take(this.nowMs()) ?? true;
  }

  /** A parked tenant has a batch (REFILL_BATCH_MS worth) again, so it wakes rarely. */
  refilled(tenant: string): boolean {
    return this.bucketOf(tenant)?.has(this.nowMs(), this.batch()) ?? true;
  }

  /** How long until refilled(tenant). */
  waitMs(tenant: string): number {
    return this.bucketOf(tenant)?.waitMs(this.nowMs(), this.batch()) ?? 0;
  }

  private batch(): number {
    return Math.max(1, Math.ceil(((this.limits?.perSecond ?? 0) * REFILL_BATCH_MS) / 1000));
  }

  private bucketOf(tenant: string): TokenBucket | undefined {
    const r = this.limits;
    if (r === undefined) return undefined;
    let b = this.buckets.get(tenant);
    if (b === undefined) {
      b = new TokenBucket(r.perSecond, r.burst, this.nowMs());
      this.buckets.set(tenant, b);
    }
    return b;
  }
}
