// Whether a tenant may open a new session now: at most maxSessionsPerTenant of its own and
// maxSessionsTotal of everyone's open at once, and new sessions at no more than opensPerSecond
// on average per tenant with bursts up to openBurst (a token bucket per tenant, filled by the
// injected clock). Resuming a session is never limited: after a failover every guest resumes
// at once. Pure; the buckets are this node's (a new primary starts them full).

export interface SessionAdmissionLimits {
  readonly maxSessionsPerTenant: number;
  readonly maxSessionsTotal: number;
  readonly opensPerSecond: number;
  readonly openBurst: number;
}

import { TokenBucket } from "./token-bucket.js";

export class SessionAdmission {
  readonly limits: SessionAdmissionLimits;
  private readonly nowMs: () => number;
  private readonly buckets = new Map<string, TokenBucket>();

  constructor(limits: SessionAdmissionLimits, nowMs: () => number) {
    this.limits = limits;
    this.nowMs = nowMs;
  }

  /**
   * null when `tenant` (already authenticated) may open one more session now, and then counts
   * it against the tenant's rate; otherwise the reason, and nothing is counted. `waitMs` is
   * how long until the rate would let one through (0 for the count limits).
   */
  admit(
    tenant: string,
    open: { readonly total: number; readonly ofTenant: number },
  ): { readonly reason: string; readonly waitMs: number } | null {
    const l = this.limits;
    if (open.ofTenant >= l.maxSessionsPerTenant) {
      return {
        reason: `tenant has ${open.ofTenant} sessions open, limit ${l.maxSessionsPerTenant}`,
        waitMs: 0,
      };
    }
    if (open.total >= l.maxSessionsTotal) {
      return {
        reason: `node has no room for another session (limit ${l.maxSessionsTotal})`,
        waitMs: 0,
      };
    }
    const now = this.nowMs();
    let bucket = this.buckets.get(tenant);
    if (bucket === undefined) {
      bucket = new TokenBucket(l.opensPerSecond, l.openBurst, now);
      this.buckets.set(tenant, bucket);
    }
    if (!bucket.take(now)) {
      return {
        reason: `session opens above ${l.opensPerSecond} per second (burst ${l.openBurst})`,
        waitMs: bucket.waitMs(now),
      };
    }
    return null;
  }
}
