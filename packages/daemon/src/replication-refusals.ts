// One place where a node reports replication peers it would not believe: a hello or Probe from
// outside its cluster or from another node than peer.name (inbound), or a node at the peer's
// address that named itself as someone else (outbound), or the peer's hello announcing another
// replication protocol version (incompatible_version, either direction; the detail names both
// versions) or another kernel contract (incompatible_contract: the detail names both contracts
// and devices). Each is counted in
// vgpu_replication_refusals_total{reason,direction} and logged at most once a second per
// reason and direction, with the remote address.
import type { NodeMetrics } from "@vgpu-ha/common";
import { rateLimitedWarn, type WarnLog } from "./refusal-log.js";

export type RefusalDirection = "inbound" | "outbound";

export interface ReplicationRefusals {
  report(
    refusal: { readonly reason: string; readonly message: string },
    remote: string,
    direction: RefusalDirection,
  ): void;
}

export function replicationRefusals(
  metrics: NodeMetrics,
  log: () => WarnLog,
  nowMs?: () => number,
): ReplicationRefusals {
  const warn = rateLimitedWarn({ warn: (f, m) => log().warn(f, m) }, 1000, nowMs);
  return {
    report(refusal, remote, direction) {
      if (refusal.reason === "stale_epoch") return; // our own peer, counted as a stale epoch
      metrics.replicationRefusals.inc({ reason: refusal.reason, direction });
      warn(
        `${direction}:${refusal.reason}`,
        { reason: refusal.reason, direction, remote, detail: refusal.message },
        message(refusal.reason, direction),
      );
    },
  };
}

function message(reason: string, direction: RefusalDirection): string {
  if (reason === "incompatible_version") {
    return "refused the replication peer: it speaks another replication protocol version";
  }
  if (reason === "incompatible_contract") {
    return "refused the replication peer: its device runs another kernel contract";
  }
  return direction === "inbound"
    ? "refused a replication peer that is not ours"
    : "the node at the peer's address is not our peer";
}
