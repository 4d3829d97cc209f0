// Rules between fields of the config that the schema checks at load: listeners that would take
// the same address, and tenants that share a token (a guest could not be told apart).

/** The port of a `host:port` (0: any free port). */
export const portOf = (address: string): number =>
  Number(address.slice(address.lastIndexOf(":") + 1));

const hostOf = (address: string): string => address.slice(0, address.lastIndexOf(":"));

const WILDCARDS = new Set(["0.0.0.0", "[::]", "::"]);

/** Whether two listeners would bind the same address (port 0 never clashes). */
export function sameListener(a: string, b: string): boolean {
  if (portOf(a) === 0 || portOf(a) !== portOf(b)) return false;
  const [ha, hb] = [hostOf(a).toLowerCase(), hostOf(b).toLowerCase()];
  return ha === hb || WILDCARDS.has(ha) || WILDCARDS.has(hb);
}

/** The first listener whose address an earlier one already takes: [field, value, other field]. */
export function listenerClash(
  listeners: Record<string, string>,
): [field: string, value: string, other: string] | null {
  const entries = Object.entries(listeners);
  for (let i = 1; i < entries.length; i++) {
    const [field, value] = entries[i]!;
    const earlier = entries.slice(0, i).find(([, v]) => sameListener(v, value));
    if (earlier) return [field, value, earlier[0]];
  }
  return null;
}

/** The first tenant whose token an earlier tenant has: [index, earlier index]. */
export function sharedToken(
  tenants: readonly { token?: string | undefined }[],
): [index: number, other: number] | null {
  const seen = new Map<string, number>();
  for (const [i, t] of tenants.entries()) {
    if (t.token === undefined) continue;
    const other = seen.get(t.token);
    if (other !== undefined) return [i, other];
    seen.set(t.token, i);
  }
  return null;
}
