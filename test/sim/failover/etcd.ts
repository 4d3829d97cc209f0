// etcd as the simulator runs it (lease.mode etcd): a linearizable key-value store with TTL
// leases in real (simulated) time, holding the leader key and the cluster record of
// core/etcd-lease.ts; each node reaches it over its own link, which a fault can cut. SimArbiter
// mirrors the daemon's EtcdArbiter (packages/daemon/src/lease/etcd-arbiter.ts) on a node's
// simulated process: every request has a deadline on the node's clock, a cut link loses the
// request or its answer (the operation may still have happened), the lease is kept alive on a
// timer and its safe end is counted from each answered keepalive's send time minus the drift
// margin. Difference: TTLs are milliseconds (etcd's are whole seconds); keepalives are
// requests of their own rather than messages on one stream.
import {
  type ClusterRecord,
  etcdLeaseEndMs,
  type LeaderValue,
  type LeaseTerms,
} from "@vgpu-ha/common";
import type { SimRng } from "../rng.js";
import type { NodeName } from "./params.js";
import type { SimProcess, Timer } from "./process.js";
import type { World } from "./world.js";

export interface EtcdTerms {
  readonly ttlMs: number;
  readonly keepaliveMs: number;
  readonly pollMs: number;
  readonly requestTimeoutMs: number;
  readonly latencyMs: readonly [number, number];
}

export interface EtcdView {
  readonly leader: (LeaderValue & { readonly lease: number }) | undefined;
  readonly record: ClusterRecord | undefined;
  readonly recordModRevision: number;
}

interface Lease {
  readonly ttlMs: number;
  expiresAtMs: number;
}

/** The etcd cluster: one linearizable store; time is the simulation's real time. */
export class SimEtcd {
  private readonly world: World;
  private readonly rng: SimRng;
  readonly terms: EtcdTerms;
  private revision = 1;
  private leader: { value: LeaderValue; lease: number } | undefined;
  private record: { value: ClusterRecord; modRevision: number } | undefined;
  private readonly leases = new Map<number, Lease>();
  private nextLease = 1;
  /** Nodes that cannot reach etcd now. */
  private readonly cuts = new Set<NodeName>();
  readonly stats = { expired: 0, acquired: 0, revoked: 0 };

  /** `record`: a pair that ran before left its cluster record (undefined: a fresh etcd). */
  constructor(world: World, terms: EtcdTerms, rng: SimRng, record?: ClusterRecord) {
    this.world = world;
    this.terms = terms;
    this.rng = rng;
    if (record) this.record = { value: record, modRevision: this.revision };
  }

  cut(node: NodeName): void {
    this.cuts.add(node);
  }

  uncut(node: NodeName): void {
    this.cuts.delete(node);
  }

  isCut(node: NodeName): boolean {
    return this.cuts.has(node);
  }

  /** The cluster record now (for the checker). */
  get recordNow(): ClusterRecord | undefined {
    this.expire();
    return this.record?.value;
  }

  /** The leader key's holder now (for the checker). */
  get leaderNow(): LeaderValue | undefined {
    this.expire();
    return this.leader?.value;
  }

  /**
   * One request from `node` on `proc`: it reaches etcd after a latency (unless cut), runs
   * there atomically, and its answer comes back (unless cut) — or the deadline fires first.
   */
  request<T>(
    proc: SimProcess,
    node: NodeName,
    op: () => T,
    done: (error: Error | undefined, result: T | undefined) => void,
  ): void {
    let settled = false;
    const settle = (error: Error | undefined, result: T | undefined) => {
      if (settled) return;
      settled = true;
      done(error, result);
    };
    const [lo, hi] = this.terms.latencyMs;
    const leg = () => this.rng.real(lo, hi);
    if (!this.cuts.has(node)) {
      this.world.after(leg(), `${node}>etcd`, () => {
        if (this.cuts.has(node)) return; // lost on the way
        this.expire();
        const result = op();
        this.world.after(leg(), `etcd>${node}`, () => {
          if (this.cuts.has(node)) return; // the answer is lost
          proc.deliver(() => settle(undefined, result));
        });
      });
    }
    proc.setTimeout(this.terms.requestTimeoutMs, () =>
      settle(new Error("etcd: deadline exceeded"), undefined),
    );
  }

  // ---- the operations, run at etcd ----

  private expire(): void {
    const now = this.world.nowMs;
    for (const [id, lease] of this.leases) {
      if (lease.expiresAtMs <= now) this.dropLease(id, "expired");
    }
  }

  private dropLease(id: number, why: "expired" | "revoked"): void {
    if (!this.leases.delete(id)) return;
    this.stats[why]++;
    if (this.leader?.lease === id) {
      this.leader = undefined;
      this.revision++;
    }
  }

  read(): EtcdView {
    return {
      leader: this.leader ? { ...this.leader.value, lease: this.leader.lease } : undefined,
      record: this.record?.value,
      recordModRevision: this.record?.modRevision ?? 0,
    };
  }

  grant(ttlMs: number): { id: number; ttlMs: number } {
    const id = this.nextLease++;
    this.leases.set(id, { ttlMs, expiresAtMs: this.world.nowMs + ttlMs });
    this.world.after(ttlMs, "etcd lease expiry", () => this.expire());
    return { id, ttlMs };
  }

  /** The acquisition transaction: key absent, record as read; then key and record written. */
  acquire(view: EtcdView, lease: number, leader: LeaderValue): boolean {
    if (this.leader !== undefined) return false;
    if ((this.record?.modRevision ?? 0) !== view.recordModRevision) return false;
    if (!this.leases.has(lease)) return false; // etcd refuses a put under a missing lease
    this.revision++;
    this.leader = { value: leader, lease };
    this.record = {
      value: { epoch: leader.epoch, primary: leader.nodeId, replica: "" },
      modRevision: this.revision,
    };
    this.stats.acquired++;
    return true;
  }

  /** Writes the record's replica only while `lease` holds the leader key. */
  setReplica(lease: number, record: ClusterRecord): boolean {
    if (this.leader?.lease !== lease) return false;
    this.revision++;
    this.record = { value: record, modRevision: this.revision };
    return true;
  }

  revoke(lease: number): void {
    this.dropLease(lease, "revoked");
  }

  /** A keepalive: the remaining TTL (the lease renewed), or 0 when the lease is gone. */
  keepAlive(lease: number): number {
    const l = this.leases.get(lease);
    if (l === undefined) return 0;
    l.expiresAtMs = this.world.nowMs + l.ttlMs;
    this.world.after(l.ttlMs, "etcd lease expiry", () => this.expire());
    return l.ttlMs;
  }
}

/** EtcdArbiter, on one node process. */
export class SimArbiter {
  private readonly etcd: SimEtcd;
  private readonly proc: SimProcess;
  private readonly node: NodeName;
  private readonly lease: LeaseTerms;
  private leaseId: number | undefined;
  private ttlMs = 0;
  private endMs = Number.NEGATIVE_INFINITY;
  private keepTimer: Timer | undefined;
  private closed = false;
  onLost: (() => void) | undefined;

  constructor(etcd: SimEtcd, proc: SimProcess, node: NodeName, lease: LeaseTerms) {
    this.etcd = etcd;
    this.proc = proc;
    this.node = node;
    this.lease = lease;
  }

  get holding(): boolean {
    return this.leaseId !== undefined;
  }

  leaseEndMs(): number {
    return this.leaseId === undefined ? Number.NEGATIVE_INFINITY : this.endMs;
  }

  read(done: (error: Error | undefined, view: EtcdView | undefined) => void): void {
    this.etcd.request(this.proc, this.node, () => this.etcd.read(), done);
  }

  /** Grants a lease, then takes the key with the record's new epoch (one transaction). */
  acquire(
    view: EtcdView,
    epoch: number,
    done: (error: Error | undefined, acquired: boolean) => void,
  ): void {
    if (this.closed) {
      done(undefined, false);
      return;
    }
    const sentMs = this.proc.now();
    const ttl = this.etcd.terms.ttlMs;
    this.etcd.request(
      this.proc,
      this.node,
      () => this.etcd.grant(ttl),
      (error, grant) => {
        if (error || grant === undefined) {
          done(error, false);
          return;
        }
        const leader = { nodeId: this.node, epoch, guestAddress: this.node };
        this.etcd.request(
          this.proc,
          this.node,
          () => this.etcd.acquire(view, grant.id, leader),
          (txError, ok) => {
            if (txError || !ok) {
              this.revoke(grant.id);
              done(txError, false);
              return;
            }
            this.leaseId = grant.id;
            this.ttlMs = grant.ttlMs;
            this.endMs = etcdLeaseEndMs(sentMs, this.ttlMs, this.lease.driftMarginMs);
            this.startKeepAlive();
            done(undefined, true);
          },
        );
      },
    );
  }

  setReplica(
    epoch: number,
    replica: string,
    done: (error: Error | undefined, written: boolean) => void,
  ): void {
    const id = this.leaseId;
    if (id === undefined) {
      done(undefined, false);
      return;
    }
    const record = { epoch, primary: this.node, replica };
    this.etcd.request(
      this.proc,
      this.node,
      () => this.etcd.setReplica(id, record),
      (error, ok) => done(error, ok === true),
    );
  }

  /** Gives the key up (revokes the lease): the standby may take it at once. */
  resign(): void {
    const id = this.leaseId;
    if (id === undefined) return;
    this.dropLease();
    this.revoke(id);
  }

  close(): void {
    this.closed = true;
    this.resign();
  }

  private revoke(id: number): void {
    this.etcd.request(
      this.proc,
      this.node,
      () => this.etcd.revoke(id),
      () => undefined,
    );
  }

  private dropLease(): void {
    this.leaseId = undefined;
    this.endMs = Number.NEGATIVE_INFINITY;
    this.proc.clear(this.keepTimer);
    this.keepTimer = undefined;
  }

  private startKeepAlive(): void {
    this.proc.clear(this.keepTimer);
    this.keepTimer = this.proc.setInterval(this.etcd.terms.keepaliveMs, () => this.keepAlive());
  }

  private keepAlive(): void {
    const id = this.leaseId;
    if (id === undefined) return;
    const sentMs = this.proc.now();
    this.etcd.request(
      this.proc,
      this.node,
      () => this.etcd.keepAlive(id),
      (error, ttlMs) => {
        if (error || ttlMs === undefined || this.leaseId !== id) return;
        if (!(ttlMs > 0)) {
          this.dropLease();
          this.onLost?.();
          return;
        }
        this.endMs = Math.max(this.endMs, etcdLeaseEndMs(sentMs, ttlMs, this.lease.driftMarginMs));
      },
    );
  }
}
