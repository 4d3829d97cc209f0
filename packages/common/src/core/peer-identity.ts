// Who may speak replication to this node: its configured peer (node id = peer.name) of its own
// cluster, and nobody else. A hello or a Probe from anyone else is refused *before* its epoch is
// looked at, so no stranger — a primary of another pair, a copy-pasted peer address, a forged
// hello — can move this node's epoch, make it step down or throw its state away. The same rule
// applies in both directions: a node that dials its peer believes nothing the other end says
// (not even an error's epoch) until that end has named itself as the peer.
import { ErrorCode } from "./errors.js";
import type { StandbyMessage } from "./messages.js";

export interface PeerIdentityRule {
  readonly clusterId: string;
  /** This node's own id: a peer claiming it is an impostor or a mis-configured twin. */
  readonly nodeId: string;
  /** The only node id this node accepts from the other end (config `peer.name`). */
  readonly peerName: string;
}

/** Why a stream or probe was refused, as counted in vgpu_replication_refusals_total{reason}. */
export const RefusalReason = {
  wrongCluster: "wrong_cluster",
  wrongNode: "wrong_node",
  ownNodeId: "own_node_id",
  noHello: "no_hello",
} as const;
export type RefusalReason = (typeof RefusalReason)[keyof typeof RefusalReason];

export interface IdentityRefusal {
  readonly reason: RefusalReason;
  readonly code: ErrorCode;
  readonly message: string;
}

/** Null when `claimed` is this node's peer in this cluster; else why not. */
export function identityRefusal(
  rule: PeerIdentityRule,
  claimed: { readonly clusterId: string; readonly nodeId: string },
): IdentityRefusal | null {
  if (claimed.clusterId !== rule.clusterId) {
    return {
      reason: RefusalReason.wrongCluster,
      code: ErrorCode.WRONG_CLUSTER,
      message: `cluster "${clip(claimed.clusterId)}" is not this node's cluster "${rule.clusterId}"`,
    };
  }
  if (claimed.nodeId === rule.nodeId) {
    return {
      reason: RefusalReason.ownNodeId,
      code: ErrorCode.WRONG_PEER,
      message: `the other end claims this node's own id "${rule.nodeId}"`,
    };
  }
  if (claimed.nodeId !== rule.peerName) {
    return {
      reason: RefusalReason.wrongNode,
      code: ErrorCode.WRONG_PEER,
      message: `node "${clip(claimed.nodeId)}" is not this node's peer "${rule.peerName}"`,
    };
  }
  return null;
}

/** A stream whose first message is not a hello. */
export const NO_HELLO: IdentityRefusal = Object.freeze({
  reason: RefusalReason.noHello,
  code: ErrorCode.WRONG_PEER,
  message: "a replication stream must start with a hello",
});

/** Strangers choose these strings: keep what is echoed into logs and errors short. */
function clip(s: string): string {
  return s.length > 64 ? `${s.slice(0, 64)}…` : s;
}

/**
 * What a primary answers its peer when that peer dials it as a primary of a lower epoch: first
 * a hello naming itself (the dialler believes no epoch from an end that has not), whose epoch
 * makes the dialler step down, then the refusal.
 */
export function lowerEpochRefusal(self: {
  readonly clusterId: string;
  readonly nodeId: string;
  readonly epoch: number;
}): StandbyMessage[] {
  return [
    {
      kind: "hello",
      epoch: self.epoch,
      clusterId: self.clusterId,
      nodeId: self.nodeId,
      empty: true,
      lastAppliedSeq: 0,
      snapshotId: 0,
      snapshotChunk: 0,
    },
    {
      kind: "error",
      epoch: self.epoch,
      code: ErrorCode.STALE_EPOCH,
      message: `${self.nodeId} is primary at epoch ${self.epoch}`,
    },
  ];
}
