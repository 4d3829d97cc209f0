// Tenant authentication: a bearer token per tenant, compared in constant time. An unknown
// tenant costs the same comparison as a wrong token and gets the same answer.
import { createHash, timingSafeEqual } from "node:crypto";

const digestOf = (s: string) => createHash("sha256").update(s, "utf8").digest();

export class TenantAuth {
  private readonly tokens: Map<string, Buffer>;
  private readonly decoy = digestOf("vgpu-ha decoy token");

  constructor(tenants: readonly { name: string; token: string }[]) {
    this.tokens = new Map(tenants.map((t) => [t.name, digestOf(t.token)]));
  }

  /** True only for a configured tenant with its own token. */
  check(tenant: string, token: string): boolean {
    const expected = this.tokens.get(tenant);
    const match = timingSafeEqual(expected ?? this.decoy, digestOf(token));
    return expected !== undefined && match;
  }
}
