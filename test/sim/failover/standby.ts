// The standby role as the simulator runs it: a mirror of packages/daemon/src/roles/standby-role.ts,
// of the StandbyLink shell (packages/standby/src/standby-link.ts) and of refuseGuests, over
// the simulated process, timers and streams. The decisions are the real core's: the Receiver
// (with the real applier, wrapped to record what it applies), watchStandbyLease (the lease
// rule, eligibility, self-pause detection). A divergence never happens in a correct run: it
// fails the run.
import {
  ErrorCode,
  holdingOf,
  identityRefusal,
  mayAcquire,
  NO_HELLO,
  type PrimaryMessage,
  type StandbyMessage,
  watchStandbyLease,
} from "@vgpu-ha/common";
import { Backend } from "@vgpu-ha/gpu-model";
import { applyEntry, Receiver } from "@vgpu-ha/standby";
import type { SimArbiter } from "./etcd.js";
import type { GuestMessage, NodeMessage } from "./guest-protocol.js";
import type { End } from "./net.js";
import type { Takeover } from "./primary.js";
import type { Timer } from "./process.js";
import { CLUSTER, type SimRoleDeps } from "./roles.js";
import { SimFailure } from "./world.js";

type FromPrimary = End<StandbyMessage, PrimaryMessage>;

export class SimStandby {
  readonly name = "standby" as const;
  readonly deps: SimRoleDeps;
  readonly receiver: Receiver;
  private link: FromPrimary | undefined;
  /** Accepted streams not live yet (StandbyLink.pending), and whether the link was closed. */
  private readonly pending = new Set<FromPrimary>();
  private closed = false;
  /** Own monotonic ms of the last message from a primary (StandbyLink.lastMessageMs). */
  lastMessageMs: number | undefined;
  private leaseTimer: Timer | undefined;
  private promoting = false;
  private lastWatchMs: number | undefined;
  private ineligibleCounted = false;
  private stopped = false;
  /** Guests arriving during a switchover's promotion wait here for the new primary role. */
  private parked: End<NodeMessage, GuestMessage>[] = [];
  private parking = false;
  private parkTimer: Timer | undefined;

  constructor(deps: SimRoleDeps) {
    this.deps = deps;
    const where = `standby ${deps.node}`;
    this.receiver = new Receiver(
      {
        clusterId: CLUSTER,
        nodeId: deps.node,
        backendOptions: { ...deps.backendOptions, trackMmio: false },
        apply: (backend, entry) => {
          deps.lineages.follows(backend, entry, where);
          const result = applyEntry(backend, entry);
          if (result.ok && (result.checkpoint === undefined || result.checkpoint.equal)) {
            deps.lineages.push(backend, entry);
          }
          return result;
        },
      },
      deps.supervisor.epoch(),
    );
  }

  start(): void {
    const tickMs = Math.max(5, Math.floor(this.deps.params.lease.heartbeatMs / 2));
    this.leaseTimer = this.deps.proc.setInterval(tickMs, () => this.watchLease());
  }

  stop(reason: string): void {
    this.stopped = true;
    this.deps.proc.clear(this.leaseTimer);
    this.deps.proc.clear(this.parkTimer);
    // Parked guests go to the new primary role when promoted; otherwise they are refused.
    if (reason !== "promoted") for (const s of this.parked.splice(0)) this.refuse(s);
    this.closed = true;
    for (const pending of [...this.pending]) pending.close(reason);
    this.link?.close(reason);
    this.link = undefined;
  }

  /** A primary has spoken to this standby within the lease. */
  primaryInSight(): boolean {
    const last = this.lastMessageMs;
    return last !== undefined && this.deps.proc.now() - last < this.deps.params.lease.leaseMs;
  }

  /** StandbyRole.holdsReplica (during a snapshot, the replica it replaces). */
  get holdsReplica(): boolean {
    const r = this.receiver;
    const whole = r.state === "replica" || r.state === "snapshot";
    return whole && r.backend !== undefined && r.appliedSeq > 0;
  }

  get connected(): boolean {
    return this.link !== undefined;
  }

  serveGuest(stream: End<NodeMessage, GuestMessage>): void {
    if (this.parking && !this.stopped) {
      stream.pauseReading(); // its frames wait for the primary role
      this.parked.push(stream);
      return;
    }
    this.refuse(stream);
  }

  /** The guest streams parked during a promotion, for the new primary role to serve. */
  takeParked(): End<NodeMessage, GuestMessage>[] {
    this.deps.proc.clear(this.parkTimer);
    return this.parked.splice(0);
  }

  private parkGuests(ms: number): void {
    this.deps.proc.clear(this.parkTimer);
    this.parking = true;
    this.parkTimer = this.deps.proc.setTimeout(ms, () => {
      this.parking = false;
      for (const s of this.parked.splice(0)) this.refuse(s);
    });
  }

  /** refuseGuests: NOT_PRIMARY, naming the primary while it is known to be alive. */
  private refuse(stream: End<NodeMessage, GuestMessage>): void {
    const last = this.lastMessageMs;
    const fresh =
      last !== undefined && this.deps.proc.now() - last < this.deps.params.lease.leaseMs;
    stream.send({
      kind: "error",
      code: ErrorCode.NOT_PRIMARY,
      message: "this node is the standby",
      redirect: this.link !== undefined && fresh ? this.deps.peer : "",
    });
    stream.close("standby");
  }

  /** StandbyLink.accept: a new stream becomes the live one only after a valid hello. */
  acceptReplication(conn: FromPrimary): void {
    const { receiver } = this;
    if (this.closed) {
      conn.close("standby stopped");
      return;
    }
    this.pending.add(conn);
    conn.onMessage((message) => {
      if (this.link !== conn) {
        this.pending.delete(conn);
        // As StandbyLink.refusal: who it is first (peer-identity.ts), then the epoch.
        const who =
          message.kind === "hello"
            ? identityRefusal(
                { clusterId: CLUSTER, nodeId: this.deps.node, peerName: this.deps.peer },
                message,
              )
            : NO_HELLO;
        if (who !== null || message.epoch < receiver.epoch) {
          if (who === null) conn.send(receiver.hello()); // our peer, stale: so it steps down
          conn.send({
            kind: "error",
            epoch: who === null ? receiver.epoch : 0,
            code: who?.code ?? ErrorCode.STALE_EPOCH,
            message: who?.message ?? "an older epoch",
          });
          conn.close("no valid hello");
          return;
        }
        if (this.link) this.link.close("replaced by a newer stream");
        this.link = conn;
        conn.send(receiver.hello());
      }
      if (message.epoch >= receiver.epoch) this.lastMessageMs = this.deps.proc.now();
      const before = receiver.backend;
      for (const out of receiver.step(message)) conn.send(out);
      this.afterStep(before);
    });
    conn.onClose(() => {
      this.pending.delete(conn);
      if (this.link === conn) {
        this.link = undefined;
        receiver.disconnected();
      }
    });
  }

  private watchLease(): void {
    const { watch, verdict } = watchStandbyLease(
      { lastWatchMs: this.lastWatchMs, lastMessageMs: this.lastMessageMs },
      this.deps.proc.now(),
      this.deps.params.lease,
      this.receiver.eligible,
    );
    this.lastWatchMs = watch.lastWatchMs;
    this.lastMessageMs = watch.lastMessageMs;
    if (verdict === "woke") {
      this.deps.stats.selfPauseDetected++;
      return;
    }
    if (this.deps.arbiter) {
      this.watchEtcd(this.deps.proc.now(), this.deps.arbiter);
      return;
    }
    if (verdict === "no-primary" || this.promoting) return;
    if (verdict === "live") {
      this.ineligibleCounted = false;
      return;
    }
    if (verdict === "ineligible") {
      if (!this.ineligibleCounted) {
        this.ineligibleCounted = true;
        this.deps.stats.ineligibleExpiries++;
      }
      return;
    }
    this.promoting = true;
    this.parkGuests(2000);
    this.deps.supervisor.promote("lease_expired");
  }

  // ---- etcd mode (StandbyRole.watchEtcd, tryEtcd) ----

  private etcdBusy = false;
  private etcdLastMs = Number.NEGATIVE_INFINITY;
  /** The primary handed over: take the key as soon as it gives it up. */
  private handoverPending = false;

  /**
   * The standby takes over only by taking the leader key, when the rule allows (mayAcquire):
   * the key is free and this node holds the newest state (the granted replica the record
   * names), or nobody does and it is the configured primary.
   */
  private watchEtcd(now: number, arbiter: SimArbiter): void {
    if (this.promoting || this.etcdBusy || this.stopped) return;
    const pollMs = this.handoverPending ? 10 : this.deps.params.etcd!.pollMs;
    if (now - this.etcdLastMs < pollMs) return;
    this.etcdLastMs = now;
    this.etcdBusy = true;
    this.tryEtcd(arbiter, () => {
      this.etcdBusy = false;
    });
  }

  private tryEtcd(arbiter: SimArbiter, done: () => void): void {
    const { supervisor, node } = this.deps;
    arbiter.read((error, view) => {
      if (error || view === undefined || view.leader) return done();
      const decide = (peer: Parameters<typeof mayAcquire>[0]["peer"]) =>
        mayAcquire({
          me: node,
          configuredPrimary: this.deps.configured === "primary",
          leaderPresent: false,
          record: view.record,
          mine: this.receiver.eligible
            ? "granted-replica"
            : this.holdsReplica
              ? "replica"
              : "nothing",
          peer,
          localEpoch: supervisor.epoch(),
        });
      const act = (decision: ReturnType<typeof mayAcquire>) => {
        if (!decision.acquire || this.stopped || this.promoting) return done();
        arbiter.acquire(view, decision.epoch, (acquireError, acquired) => {
          done();
          if (acquireError || !acquired) return;
          this.promoting = true;
          this.parkGuests(2000);
          this.deps.stats.etcdKeyAcquired++;
          supervisor.promote(
            this.handoverPending ? "switchover" : "etcd_key_acquired",
            !this.receiver.eligible,
            decision.epoch,
          );
        });
      };
      const first = decide(undefined);
      if (first.acquire) return act(first);
      // Whether the peer holds the state decides between waiting and starting afresh.
      this.deps.probePeer((p) => {
        act(decide(p && { nodeId: p.nodeId, holds: holdingOf(p) }));
      });
    });
  }

  /** The replica to serve with; forced (recovery), whatever replica there is. */
  takeover(force = false): Takeover | undefined {
    const backend = this.receiver.backend;
    if (backend && (this.receiver.eligible || force)) {
      return { backend, lastSeq: this.receiver.appliedSeq };
    }
    if (!force) return undefined;
    return { backend: new Backend(this.deps.backendOptions), lastSeq: this.receiver.appliedSeq };
  }

  probe() {
    return {
      role: "standby" as const,
      replica: this.receiver.eligible,
      appliedSeq: this.receiver.appliedSeq,
    };
  }

  private afterStep(before: Backend | undefined): void {
    const { supervisor, lineages, stats } = this.deps;
    const r = this.receiver;
    if (r.epoch > supervisor.epoch()) supervisor.adoptEpoch(r.epoch);
    for (const e of r.takeEvents()) {
      switch (e.kind) {
        case "divergence":
          throw new SimFailure(`standby ${this.deps.node} diverged at seq ${e.seq}: ${e.detail}`);
        case "snapshotDone": {
          const id = Number(e.detail.split(" ")[1]);
          lineages.snapshotInstalled(id, e.seq, r.backend!);
          stats.snapshotsInstalled++;
          if (before !== undefined && before !== r.backend) {
            this.deps.checker.replaced(this.deps.node, before, r.epoch);
          }
          break;
        }
        case "staleEpoch":
          stats.staleEpochRefusals++;
          break;
        case "handover":
          this.parkGuests(2000);
          if (this.deps.arbiter) {
            this.handoverPending = true; // promote once the key is ours
            break;
          }
          this.promoting = true;
          supervisor.promote("switchover");
          break;
        default:
          break;
      }
    }
  }

  describe(): string {
    const r = this.receiver;
    return `standby@${r.epoch} ${r.state} applied ${r.appliedSeq}${r.granted ? " granted" : ""}${this.link ? " linked" : ""}`;
  }
}
