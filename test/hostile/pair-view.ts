// Reads which node of a pair is the primary now and builds the context an attack runs in.

import type { AttackerTls } from "./attacks/outcome.js";
import type { AttackContext, AttackDef, PairNode, Scale } from "./catalogue.js";
import {
  CROWD_TENANT,
  HOSTILE_ADMIN,
  idleSecondsSupported,
  MALLORY_TENANT,
} from "./pair-config.js";

interface Status {
  role: string;
  epoch: number;
  replication: { state: string } | null;
}

async function statusOf(n: PairNode): Promise<Status | undefined> {
  try {
    const res = await fetch(`${n.opsUrl}/v1/status`, { signal: AbortSignal.timeout(2000) });
    return res.ok ? ((await res.json()) as Status) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Waits (up to `timeoutMs`) until one node is a primary streaming to the other, a complete
 * replica; returns [primary, standby] and the primary's epoch.
 */
export async function waitHealthy(
  nodes: readonly [PairNode, PairNode],
  timeoutMs = 30_000,
): Promise<{ primary: PairNode; standby: PairNode; epoch: number }> {
  const deadline = performance.now() + timeoutMs;
  let last = "";
  for (;;) {
    const s = await Promise.all(nodes.map(statusOf));
    last = s
      .map(
        (x, i) =>
          `${nodes[i]!.id} ${x ? `${x.role}@${x.epoch}/${x.replication?.state}` : "unreachable"}`,
      )
      .join(", ");
    for (const i of [0, 1] as const) {
      const p = s[i];
      const q = s[1 - i];
      if (
        p?.role === "primary" &&
        p.replication?.state === "streaming" &&
        q?.replication?.state === "replica"
      ) {
        return { primary: nodes[i]!, standby: nodes[1 - i]!, epoch: p.epoch };
      }
    }
    if (performance.now() > deadline) throw new Error(`the pair is not healthy: ${last}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function contextFor(
  def: AttackDef,
  nodes: readonly [PairNode, PairNode],
  options: { scale: Scale; clusterId: string; attackerTls?: (peerName: string) => AttackerTls },
): Promise<AttackContext> {
  const { primary, standby, epoch } = await waitHealthy(nodes);
  const node = def.at === "primary" ? primary : standby;
  return {
    scale: options.scale,
    clusterId: options.clusterId,
    adminToken: HOSTILE_ADMIN,
    node,
    other: node === primary ? standby : primary,
    epoch,
    sessionTenant: CROWD_TENANT,
    hostileTenant: MALLORY_TENANT,
    sessionIdleSeconds: idleSecondsSupported(),
    ...(options.attackerTls ? { attackerTls: options.attackerTls } : {}),
  };
}
