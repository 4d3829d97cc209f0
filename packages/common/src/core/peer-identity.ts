// Who may speak replication to this node: its configured peer (node id = peer.name) of its own
// cluster, and nobody else. A hello or a Probe from anyone else is refused *before* its epoch is
// looked at, so no stranger — a primary of another pair, a copy-pasted peer address, a forged
// hello — can move this node's epoch, make it step down or throw its state away. The same rule
// applies in both directions: a node that dials its peer believes nothing the other end says
// (not even an error's epoch) until that end has named itself as the peer. A hello from the peer
// is then also refused when it announces another replication protocol version (peer-version.ts).
import { ErrorCode } from "./errors.js";
import type { StandbyMessage } from "./messages.js";
import {
  type AnnouncedVersion,
  announcedVersion,
  compatibleContracts,
  compatibleVersions,
  describeContract,
  describeVersion,
  type NodeVersion,
  REPLICATION_PROTOCOL_VERSION,
} from "./peer-version.js";

export interface PeerIdentityRule {
  readonly clusterId: string;
  /** This node's own id: a peer claiming it is an impostor or a mis-configured twin. */
  readonly nodeId: string;
  /** The only node id this node accepts from the other end (config `peer.name`). */
  readonly peerName: string;
  /** What this node runs (absent: this build's protocol, package version unknown). */
  readonly version?: NodeVersion;
}

/** Why a stream or probe was refused, as counted in vgpu_replication_refusals_total{reason}. */
export const RefusalReason = {
  wrongCluster: "wrong_cluster",
  wrongNode: "wrong_node",
  ownNodeId: "own_node_id",
  noHello: "no_hello",
  incompatibleVersion: "incompatible_version",
  /** The peer's device runs another kernel contract (a standby then exits: vgpud exit 2). */
  incompatibleContract: "incompatible_contract",
} as const;
export type RefusalReason = (typeof RefusalReason)[keyof typeof RefusalReason];

export interface IdentityRefusal {
  readonly reason: RefusalReason;
  readonly code: ErrorCode;
  readonly message: string;
  /** incompatible_version, incompatible_contract: what both ends run, for the log and status. */
  readonly versions?: { readonly own: NodeVersion; readonly peer: NodeVersion };
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

/**
 * Null when a replication hello may be believed: it names this node's peer of this cluster
 * (identityRefusal) and announces a compatible version (peer-version.ts); else why not. A Probe
 * is checked with identityRefusal alone: it carries no version, so roles are settled as usual
 * and only the stream between builds of different protocols is refused.
 */
export function helloRefusal(
  rule: PeerIdentityRule,
  hello: { readonly clusterId: string; readonly nodeId: string } & AnnouncedVersion,
): IdentityRefusal | null {
  const who = identityRefusal(rule, hello);
  if (who !== null) return who;
  const own = rule.version ?? { version: "unknown", protocolVersion: REPLICATION_PROTOCOL_VERSION };
  const versionsOk = compatibleVersions(own, hello);
  if (versionsOk && compatibleContracts(own, hello)) return null;
  const peer = announcedVersion(hello);
  const theirs = {
    ...peer,
    version: clip(peer.version),
    ...(peer.device !== undefined ? { device: clip(peer.device) } : {}),
  };
  if (!versionsOk) {
    return {
      reason: RefusalReason.incompatibleVersion,
      code: ErrorCode.INCOMPATIBLE_VERSION,
      message:
        `peer "${rule.peerName}" runs ${describeVersion(theirs)}, this node "${rule.nodeId}" ` +
        `runs ${describeVersion(own)}: nodes replicate only within one protocol version`,
      versions: { own, peer: theirs },
    };
  }
  return {
    reason: RefusalReason.incompatibleContract,
    code: ErrorCode.KERNEL_CONTRACT_MISMATCH,
    message:
      `peer "${rule.peerName}" runs ${describeContract(theirs)}, this node "${rule.nodeId}" ` +
      `runs ${describeContract(own)}: the same calls would give other bits, so nodes ` +
      "replicate only within one kernel contract",
    versions: { own, peer: theirs },
  };
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
    helloNaming(self),
    {
      kind: "error",
      epoch: self.epoch,
      code: ErrorCode.STALE_EPOCH,
      message: `${self.nodeId} is primary at epoch ${self.epoch}`,
    },
  ];
}

/**
 * What a node answers a stream it refuses for `why`: a stranger gets the error alone (it learns
 * nothing of us, not even our epoch); our peer of another protocol version first gets a hello
 * naming us with our version (epoch 0: nothing is believed across versions), so it refuses us
 * too and logs both versions.
 */
export function refusalReply(
  self: { readonly clusterId: string; readonly nodeId: string },
  why: IdentityRefusal,
): StandbyMessage[] {
  const error: StandbyMessage = { kind: "error", epoch: 0, code: why.code, message: why.message };
  if (!why.versions) return [error];
  const { clusterId, nodeId } = self;
  return [helloNaming({ clusterId, nodeId, epoch: 0 }, why.versions.own), error];
}

/** A hello that only names this node (no replica, nothing to resume), with its version. */
function helloNaming(
  self: { readonly clusterId: string; readonly nodeId: string; readonly epoch: number },
  version?: NodeVersion,
): StandbyMessage {
  return {
    kind: "hello",
    epoch: self.epoch,
    clusterId: self.clusterId,
    nodeId: self.nodeId,
    empty: true,
    lastAppliedSeq: 0,
    snapshotId: 0,
    snapshotChunk: 0,
    ...version,
  };
}
