// The guest service's checks of an Open before the session machine sees it: the cluster it
// names, then the tenant's credentials (token or client certificate). Each refusal is reported.
import { ErrorCode, type GuestLink, type wire } from "@vgpu-ha/common";
import type { Refusal } from "./core/guest-session-types.js";
import type { GuestServiceDeps, GuestServiceRefusal } from "./guest-service-deps.js";

/** Longest tenant name a refusal reports (the name is the guest's, unchecked). */
const REPORTED_TENANT_CHARS = 128;

type Deps = Pick<GuestServiceDeps, "clusterId" | "auth" | "onRefused">;

export function checkOpen(deps: Deps, link: GuestLink, open: wire.Open): Refusal | undefined {
  const { clusterId, auth } = deps;
  // Before the credentials: a guest of another cluster must hear so, not UNAUTHENTICATED.
  if (open.clusterId !== "" && clusterId !== undefined && open.clusterId !== clusterId) {
    reportRefusal(deps, "wrong_cluster", link, open.tenant);
    const named = open.clusterId.slice(0, REPORTED_TENANT_CHARS);
    return { code: ErrorCode.WRONG_CLUSTER, message: `this node is not of cluster ${named}` };
  }
  if (!auth.check(open.tenant, open.token, link.certificateNames)) {
    reportRefusal(deps, "auth", link, open.tenant);
    return { code: ErrorCode.UNAUTHENTICATED, message: "unknown tenant or wrong token" };
  }
  return undefined;
}

export function reportRefusal(
  deps: Deps,
  reason: GuestServiceRefusal,
  link: GuestLink,
  tenant?: string,
): void {
  if (deps.onRefused === undefined) return;
  deps.onRefused(reason, {
    remote: link.remote,
    ...(tenant !== undefined ? { tenant: tenant.slice(0, REPORTED_TENANT_CHARS) } : {}),
  });
}
