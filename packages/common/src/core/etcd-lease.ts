// The etcd lease (lease.mode: etcd), as pure rules over what a node read from etcd.
//
// Two keys per cluster under a prefix:
//   <prefix>/<cluster>/leader  — the primary's key, attached to its etcd lease: it exists only
//                                while the primary keeps the lease alive.
//   <prefix>/<cluster>/record  — the cluster record, without a lease: the epoch of the newest
//                                term, its primary, and the `replica` allowed to take over
//                                (the standby holding the sync grant, or "" when the primary
//                                serves alone).
// A node becomes primary only by creating the leader key in a transaction that also writes
// the record with epoch + 1, conditioned on the record being unchanged since it was read: so
// epochs are unique and grow, and one node at a time holds the key. The primary serves only
// while its own clock says its etcd lease is alive (counted from the SEND time of the newest
// answered keepalive, minus the drift margin), so it stops acknowledging before etcd can
// expire the lease and let another node in. It names its standby in the record only once the
// standby holds every acknowledged frame, and clears the name before serving alone.

export interface ClusterRecord {
  readonly epoch: number;
  readonly primary: string;
  /** The node that may take over (holds the sync grant), or "". */
  readonly replica: string;
}

export interface LeaderValue {
  readonly nodeId: string;
  readonly epoch: number;
  /** Where guests reach this primary. */
  readonly guestAddress: string;
}

export interface EtcdLeaseTerms {
  readonly ttlMs: number;
  readonly keepaliveMs: number;
  readonly driftMarginMs: number;
  readonly maxDriftRatio: number;
}

export function leaderKey(prefix: string, clusterId: string): string {
  return `${prefix.replace(/\/+$/, "")}/${clusterId}/leader`;
}

export function recordKey(prefix: string, clusterId: string): string {
  return `${prefix.replace(/\/+$/, "")}/${clusterId}/record`;
}

/** Why the terms are unsafe, or null. */
export function checkEtcdLeaseTerms(t: EtcdLeaseTerms): string | null {
  if (t.keepaliveMs * 3 > t.ttlMs) {
    return `keepalive ${t.keepaliveMs} ms must be at most a third of the etcd TTL ${t.ttlMs} ms`;
  }
  const needed = Math.floor((2 * t.maxDriftRatio * t.ttlMs) / (1 + t.maxDriftRatio)) + 1;
  if (t.driftMarginMs < needed) {
    return `drift margin ${t.driftMarginMs} ms is below ${needed} ms, what a ${t.maxDriftRatio * 100} % clock drift needs over the etcd TTL ${t.ttlMs} ms`;
  }
  if (t.driftMarginMs >= t.ttlMs - t.keepaliveMs) {
    return `drift margin ${t.driftMarginMs} ms leaves no lease after a keepalive interval`;
  }
  return null;
}

/**
 * When the primary must stop acknowledging: etcd counts the TTL from when it handled the
 * keepalive, which is after the primary sent it.
 */
export function etcdLeaseEndMs(keepaliveSentMs: number, grantedTtlMs: number, marginMs: number) {
  return keepaliveSentMs + grantedTtlMs - marginMs;
}

/** What a node holds, for the acquisition rule. */
export type Holding =
  /** It is the primary role with its state (it lost or never had the key, e.g. etcd was away). */
  | "primary-state"
  /** A standby replica holding its primary's sync grant. */
  | "granted-replica"
  /**
   * A standby's complete replica its primary's heartbeats have not granted (yet): the grant
   * follows the record's write, so a primary that died in between leaves its named standby
   * with this.
   */
  | "replica"
  /** Nothing: no state (a restarted node), or none complete. */
  | "nothing";

/** What a probed peer holds (its Probe answer), for the acquisition rule. */
export function holdingOf(peer: {
  readonly role: "primary" | "standby";
  readonly replica: boolean;
  readonly appliedSeq: number;
}): Holding {
  if (peer.role === "primary") return "primary-state";
  if (peer.replica) return "granted-replica";
  return peer.appliedSeq > 0 ? "replica" : "nothing";
}

const holdsReplica = (h: Holding | undefined) => h === "granted-replica" || h === "replica";

export interface AcquireView {
  readonly me: string;
  /** This node is configured `role: primary` (it starts the cluster when no state survives). */
  readonly configuredPrimary: boolean;
  readonly leaderPresent: boolean;
  readonly record: ClusterRecord | undefined;
  readonly mine: Holding;
  /** The peer, from a probe: what it holds, or undefined when it did not answer. */
  readonly peer: { readonly nodeId: string; readonly holds: Holding } | undefined;
  /** The epoch this node persisted. */
  readonly localEpoch: number;
}

export type AcquireDecision =
  | { readonly acquire: true; readonly epoch: number; readonly reason: string }
  | { readonly acquire: false; readonly reason: string };

/**
 * Whether this node may try to take the leader key now. The node that may is the one holding
 * the newest state: the record's primary with its state intact, or the replica the record
 * names (granted by the record: the primary named it once it held every acknowledged frame
 * and clears the name before releasing what it may lack — whether the heartbeat's grant
 * reached it yet or not). When neither can hold it any more, the best state left wins: a
 * replica the record does not name (what it lacks was acknowledged by a primary serving alone
 * that lost its state) takes over, and a peer holding one is waited for; only when no node
 * holds anything (the peer answered so) does the configured primary start afresh. A silent
 * peer might still hold the state, so then nobody acquires (an operator may force).
 */
export function mayAcquire(v: AcquireView): AcquireDecision {
  const epoch = Math.max(v.record?.epoch ?? 0, v.localEpoch) + 1;
  if (v.leaderPresent) return { acquire: false, reason: "the leader key is held" };
  const r = v.record;
  if (r === undefined) {
    return v.configuredPrimary
      ? { acquire: true, epoch, reason: "cold start: no cluster record" }
      : { acquire: false, reason: "cold start: waiting for the configured primary" };
  }
  if (v.mine === "primary-state" && r.primary === v.me) {
    return { acquire: true, epoch, reason: "the last primary, with its state" };
  }
  if (holdsReplica(v.mine) && r.replica === v.me) {
    return { acquire: true, epoch, reason: "the granted replica" };
  }
  const candidates = [r.primary, r.replica].filter((n) => n !== "" && n !== v.me);
  for (const c of candidates) {
    if (v.peer === undefined || v.peer.nodeId !== c) {
      return { acquire: false, reason: `waiting for ${c}, which may hold the newest state` };
    }
    const holds = c === r.primary ? v.peer.holds === "primary-state" : holdsReplica(v.peer.holds);
    if (holds) return { acquire: false, reason: `waiting for ${c} to take over` };
  }
  if (holdsReplica(v.mine)) {
    return {
      acquire: true,
      epoch,
      reason: "the best state left: a replica the record does not name",
    };
  }
  if (holdsReplica(v.peer?.holds)) {
    return { acquire: false, reason: `waiting for ${v.peer!.nodeId}, which holds a replica` };
  }
  if (v.peer === undefined) {
    // The pair ran before: a peer that does not answer may hold a replica nobody named.
    return { acquire: false, reason: "waiting for the peer, which may hold a replica" };
  }
  if (!v.configuredPrimary) {
    return {
      acquire: false,
      reason: "no node holds the state: waiting for the configured primary",
    };
  }
  return { acquire: true, epoch, reason: "no node holds the state: starting afresh" };
}

export function encodeRecord(r: ClusterRecord): string {
  return JSON.stringify({ epoch: r.epoch, primary: r.primary, replica: r.replica });
}

/** The record, or undefined when the text is not one (treated as absent by no one: callers refuse). */
export function decodeRecord(text: string): ClusterRecord | undefined {
  try {
    const o = JSON.parse(text) as Record<string, unknown>;
    if (
      typeof o["epoch"] === "number" &&
      Number.isSafeInteger(o["epoch"]) &&
      typeof o["primary"] === "string" &&
      typeof o["replica"] === "string"
    ) {
      return { epoch: o["epoch"], primary: o["primary"], replica: o["replica"] };
    }
  } catch {
    // not JSON
  }
  return undefined;
}

export function encodeLeader(l: LeaderValue): string {
  return JSON.stringify({ nodeId: l.nodeId, epoch: l.epoch, guestAddress: l.guestAddress });
}

export function decodeLeader(text: string): LeaderValue | undefined {
  try {
    const o = JSON.parse(text) as Record<string, unknown>;
    if (
      typeof o["nodeId"] === "string" &&
      typeof o["epoch"] === "number" &&
      typeof o["guestAddress"] === "string"
    ) {
      return { nodeId: o["nodeId"], epoch: o["epoch"], guestAddress: o["guestAddress"] };
    }
  } catch {
    // not JSON
  }
  return undefined;
}
