// Tenants and their quotas (backend.ts): what each tenant uses of the device over all its
// sessions (contexts, buffers, VRAM bytes), and whether one more would exceed its quota. The
// backend counts; these checks change nothing.
import { ErrorCode } from "@vgpu-ha/common/core";
import { type Failure, fail } from "../device/failure.js";

export interface TenantQuota {
  readonly vramBytes: number;
  readonly bos: number;
  /** Contexts at once, over all the tenant's sessions (unlimited when left out). */
  readonly contexts?: number;
}

export interface TenantUsage {
  vramBytes: number;
  bos: number;
  contexts: number;
}

/** Each tenant's usage, made at zero on first use. */
export class TenantUsages {
  private readonly byTenant = new Map<string, TenantUsage>();

  of(tenant: string): TenantUsage {
    let used = this.byTenant.get(tenant);
    if (used === undefined) {
      used = { vramBytes: 0, bos: 0, contexts: 0 };
      this.byTenant.set(tenant, used);
    }
    return used;
  }
}

/** One more context for a tenant using `used` (no quota or no context limit: unlimited). */
export function contextQuotaFailure(
  used: TenantUsage,
  quota: TenantQuota | undefined,
): Failure | null {
  const limit = quota?.contexts ?? Number.POSITIVE_INFINITY;
  if (used.contexts + 1 > limit) {
    return fail(ErrorCode.QUOTA_EXCEEDED, `tenant quota: ${used.contexts}/${limit} contexts`);
  }
  return null;
}

/** One more buffer of `sizeBytes` (page-rounded) for a tenant using `used`. */
export function boQuotaFailure(
  used: TenantUsage,
  quota: TenantQuota,
  sizeBytes: number,
): Failure | null {
  if (used.bos + 1 > quota.bos || used.vramBytes + sizeBytes > quota.vramBytes) {
    return fail(
      ErrorCode.QUOTA_EXCEEDED,
      `tenant quota: ${used.bos}/${quota.bos} buffers, ${used.vramBytes}+${sizeBytes}/${quota.vramBytes} bytes`,
    );
  }
  return null;
}
