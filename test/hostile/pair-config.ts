// The config the attacked pair runs with (merged into both nodes): the normal guest's tenant,
// the session attacks' tenant, limits that let one client process hold 400 sessions, and a
// short idle timeout when this vgpud knows guest.sessionIdleSeconds (a field the schema of an
// older vgpud refuses, so it is set only where it parses).
import { parseConfig } from "@vgpu-ha/common";

export const HOSTILE_ADMIN = "hostile-admin-token-0001";
export const NORMAL_TENANT = { name: "normal", token: "normal-token-hostile" } as const;
export const CROWD_TENANT = { name: "crowd", token: "crowd-token-hostile" } as const;
export const MALLORY_TENANT = { name: "mallory", token: "mallory-token-hostile" } as const;
/** The short idle timeout the pair runs with, where supported. */
export const SESSION_IDLE_SECONDS = 3;

/** Whether this build's config schema accepts `config` (e.g. a field of a newer vgpud). */
export function schemaAccepts(config: Record<string, unknown>): boolean {
  try {
    parseConfig(config);
    return true;
  } catch {
    return false;
  }
}

export function idleSecondsSupported(): number | undefined {
  return schemaAccepts({ guest: { sessionIdleSeconds: SESSION_IDLE_SECONDS } })
    ? SESSION_IDLE_SECONDS
    : undefined;
}

export function hostilePairConfig(): Record<string, unknown> {
  const idle = idleSecondsSupported();
  return {
    ops: { token: HOSTILE_ADMIN },
    // Launches above 2^20 work units are refused (the hostile tenant's gemm is 2^24).
    device: { vramBytes: "512MiB", maxKernelWork: 1 << 20 },
    // The random workloads' "DMA too big" fault must be refused as such.
    limits: {
      maxDmaBytes: "1MiB",
      maxSessionsPerTenant: 400,
      maxSessionsTotal: 1024,
      sessionOpensPerSecond: 2000,
      sessionOpenBurst: 1000,
      // A small refusal budget: the hostile tenant's flood is throttled (and counted) even
      // when this shared machine lets it send only a few hundred frames a second. The normal
      // guest's workloads refuse far fewer.
      refusedFramesPerSecond: 200,
      refusedFramesBurst: 400,
    },
    tenants: [
      { ...NORMAL_TENANT, vramQuotaBytes: "256MiB", boQuota: 100_000 },
      { ...CROWD_TENANT, vramQuotaBytes: "64MiB", boQuota: 1000 },
      { ...MALLORY_TENANT, vramQuotaBytes: "1MiB", boQuota: 4 },
    ],
    ...(idle === undefined ? {} : { guest: { sessionIdleSeconds: idle } }),
    log: { level: "info" },
  };
}
