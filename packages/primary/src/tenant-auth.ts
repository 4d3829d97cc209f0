// Tenant authentication: a bearer token per tenant, compared in constant time, or a client
// certificate (verified by the TLS layer) that names the tenant's certificateName. An unknown
// tenant costs the same comparison as a wrong token and gets the same answer, so the answer
// never tells which tenants exist.
import { createHash, timingSafeEqual } from "node:crypto";

const digestOf = (s: string) => createHash("sha256").update(s, "utf8").digest();

export interface TenantCredentials {
  readonly name: string;
  readonly token?: string | undefined;
  readonly certificateName?: string | undefined;
}

interface Known {
  /** sha256 of the token; the decoy's for a tenant without one (no token then matches). */
  readonly token: Buffer;
  readonly hasToken: boolean;
  readonly certificateName: string | undefined;
}

export class TenantAuth {
  private readonly tenants: Map<string, Known>;
  private readonly decoy = digestOf("vgpu-ha decoy token");

  constructor(tenants: readonly TenantCredentials[]) {
    this.tenants = new Map(
      tenants.map((t) => [
        t.name,
        {
          token: t.token === undefined ? this.decoy : digestOf(t.token),
          hasToken: t.token !== undefined,
          certificateName: t.certificateName,
        },
      ]),
    );
  }

  /**
   * True only for a configured tenant with its own token, or whose certificateName is among
   * `certificateNames` (the names of the stream's verified client certificate; none without).
   */
  check(tenant: string, token: string, certificateNames: readonly string[] = []): boolean {
    const known = this.tenants.get(tenant);
    // Always one comparison of equal-length digests, whatever the tenant.
    const tokenMatch = timingSafeEqual(known?.token ?? this.decoy, digestOf(token));
    if (known === undefined) return false;
    const byToken = known.hasToken && tokenMatch;
    const byCertificate =
      known.certificateName !== undefined && certificateNames.includes(known.certificateName);
    return byToken || byCertificate;
  }
}
