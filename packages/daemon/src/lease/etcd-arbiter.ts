// The etcd side of lease.mode: etcd (the rules are in @vgpu-ha/common core/etcd-lease.ts).
// Reads the leader key and the cluster record, takes the key in one transaction with the
// record's new epoch, keeps its etcd lease alive and tracks, on this node's monotonic clock,
// until when the lease surely holds: the send time of the newest answered keepalive plus the
// granted TTL minus the drift margin. Every request has a deadline; the client's own retries
// and circuit breakers are off, so a slow or absent etcd shows as failures at once.
import {
  type Clock,
  type ClusterRecord,
  type Config,
  decodeLeader,
  decodeRecord,
  encodeLeader,
  encodeRecord,
  etcdLeaseEndMs,
  type LeaderValue,
  type Logger,
  leaderKey,
  recordKey,
} from "@vgpu-ha/common";
import { noop } from "cockatiel";
import { Etcd3 } from "etcd3";
import { EtcdKeepAlive } from "./etcd-keepalive.js";

export interface EtcdView {
  /** The leader key's value and the lease it is attached to, when it exists. */
  readonly leader: (LeaderValue & { readonly lease: string }) | undefined;
  readonly record: ClusterRecord | undefined;
  /** The record's mod revision ("0" when absent): the acquisition is conditioned on it. */
  readonly recordModRevision: string;
}

export class EtcdArbiter {
  private readonly config: Config;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly client: Etcd3;
  private readonly leader: Buffer;
  private readonly recordKey: Buffer;
  /** The etcd lease this node holds the leader key under, while it does. */
  private leaseId: string | undefined;
  private ttlMs = 0;
  private endMs = Number.NEGATIVE_INFINITY;
  private keeper: EtcdKeepAlive | undefined;
  /** The lease thread's keepalives: when it last said the lease holds until (monotonic ms). */
  threadEndMs: (() => number | undefined) | undefined;
  /** Called with the lease this node now holds the key under (undefined: none). */
  onHolding: ((lease: { leaseId: string; ttlMs: number } | undefined) => void) | undefined;
  private closed = false;
  /** Called once when etcd says the lease is gone (expired or revoked). */
  onLost: (() => void) | undefined;

  constructor(config: Config, logger: Logger, clock: Clock) {
    this.config = config;
    this.logger = logger;
    this.clock = clock;
    const e = config.lease.etcd;
    this.client = new Etcd3({
      hosts: e.endpoints,
      dialTimeout: e.requestTimeoutMs,
      faultHandling: { host: () => noop, global: noop },
    });
    this.leader = Buffer.from(leaderKey(e.prefix, config.clusterId));
    this.recordKey = Buffer.from(recordKey(e.prefix, config.clusterId));
  }

  private deadline() {
    return { deadline: Date.now() + this.config.lease.etcd.requestTimeoutMs };
  }

  /** Whether this node holds the key (it may still be past its safe end: see leaseEndMs). */
  get holding(): boolean {
    return this.leaseId !== undefined;
  }

  /** Until when (monotonic ms) this node's lease surely holds; -Infinity when it holds none. */
  leaseEndMs(): number {
    if (this.leaseId === undefined) return Number.NEGATIVE_INFINITY;
    return Math.max(this.endMs, this.threadEndMs?.() ?? Number.NEGATIVE_INFINITY);
  }

  async read(): Promise<EtcdView> {
    const kv = this.client.kv;
    const res = await kv.txn(
      {
        compare: [],
        success: [
          { request_range: { key: this.leader } },
          { request_range: { key: this.recordKey } },
        ],
      },
      this.deadline(),
    );
    const leaderKv = res.responses[0]?.response_range.kvs[0];
    const recordKv = res.responses[1]?.response_range.kvs[0];
    const leader = leaderKv ? decodeLeader(leaderKv.value.toString()) : undefined;
    const record = recordKv ? decodeRecord(recordKv.value.toString()) : undefined;
    if (recordKv && !record) {
      throw new Error(`${this.recordKey.toString()} does not hold a cluster record`);
    }
    return {
      // A leader key this code cannot read is still held: nobody may take it.
      leader: leaderKv
        ? { ...(leader ?? { nodeId: "?", epoch: 0, guestAddress: "" }), lease: leaderKv.lease }
        : undefined,
      record,
      recordModRevision: recordKv?.mod_revision ?? "0",
    };
  }

  /**
   * Grants a lease and, in one transaction, creates the leader key under it and writes the
   * record with the new epoch — only if the key is absent and the record is as read. Returns
   * whether this node now holds the key.
   */
  async acquire(view: EtcdView, epoch: number, guestAddress: string): Promise<boolean> {
    if (this.closed) return false;
    const e = this.config.lease.etcd;
    const sentMs = this.clock.monotonicMs();
    const grant = await this.client.leaseClient.leaseGrant(
      { TTL: Math.round(e.ttlMs / 1000) },
      this.deadline(),
    );
    const id = grant.ID;
    const me = this.config.nodeId;
    const res = await this.client.kv
      .txn(
        {
          compare: [
            { key: this.leader, target: "Create", result: "Equal", create_revision: 0 },
            {
              key: this.recordKey,
              target: "Mod",
              result: "Equal",
              mod_revision: view.recordModRevision,
            },
          ],
          success: [
            {
              request_put: {
                key: this.leader,
                value: Buffer.from(encodeLeader({ nodeId: me, epoch, guestAddress })),
                lease: id,
              },
            },
            {
              request_put: {
                key: this.recordKey,
                value: Buffer.from(encodeRecord({ epoch, primary: me, replica: "" })),
              },
            },
          ],
        },
        this.deadline(),
      )
      .catch(async (err: unknown) => {
        await this.revoke(id);
        throw err;
      });
    if (!res.succeeded) {
      await this.revoke(id);
      return false;
    }
    this.leaseId = id;
    this.ttlMs = Number(grant.TTL) * 1000;
    this.endMs = etcdLeaseEndMs(sentMs, this.ttlMs, this.config.lease.driftMarginMs);
    this.startKeepAlive(id);
    this.logger.warn({ epoch, lease: id, ttlMs: this.ttlMs }, "etcd: took the leader key");
    return true;
  }

  /**
   * Names the node that may take over in the record (or "" for none), only while this node
   * still holds the leader key. Returns whether it was written.
   */
  async setReplica(epoch: number, replica: string): Promise<boolean> {
    const id = this.leaseId;
    if (id === undefined) return false;
    const res = await this.client.kv.txn(
      {
        compare: [{ key: this.leader, target: "Lease", result: "Equal", lease: id }],
        success: [
          {
            request_put: {
              key: this.recordKey,
              value: Buffer.from(encodeRecord({ epoch, primary: this.config.nodeId, replica })),
            },
          },
        ],
      },
      this.deadline(),
    );
    return res.succeeded;
  }

  /** Gives the key up (revokes the lease): the standby may take it at once. */
  async resign(): Promise<void> {
    const id = this.leaseId;
    if (id === undefined) return;
    this.dropLease();
    await this.revoke(id).catch((err: Error) =>
      this.logger.warn({ err: err.message }, "etcd: revoking the lease failed (it will expire)"),
    );
    this.logger.warn({ lease: id }, "etcd: resigned the leader key");
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.resign();
    this.client.close();
  }

  private async revoke(id: string): Promise<void> {
    await this.client.leaseClient.leaseRevoke({ ID: id }, this.deadline());
  }

  private dropLease(): void {
    this.leaseId = undefined;
    this.endMs = Number.NEGATIVE_INFINITY;
    this.keeper?.stop();
    this.keeper = undefined;
    this.onHolding?.(undefined);
  }

  private startKeepAlive(id: string): void {
    this.keeper?.stop();
    const e = this.config.lease.etcd;
    this.keeper = new EtcdKeepAlive(this.client, {
      leaseId: id,
      keepaliveMs: e.keepaliveMs,
      requestTimeoutMs: e.requestTimeoutMs,
      driftMarginMs: this.config.lease.driftMarginMs,
      nowMs: () => this.clock.monotonicMs(),
      onEnd: (endMs) => {
        if (this.leaseId === id) this.endMs = Math.max(this.endMs, endMs);
      },
      onLost: () => this.lost(id),
      onWarn: (message) => this.logger.warn(message),
    });
    this.onHolding?.({ leaseId: id, ttlMs: this.ttlMs });
  }

  /** etcd said the lease is gone (here or on the lease thread). */
  lost(id: string): void {
    if (this.leaseId !== id) return;
    this.logger.error({ lease: id }, "etcd: the lease is gone: lost the leader key");
    this.dropLease();
    this.onLost?.();
  }
}
