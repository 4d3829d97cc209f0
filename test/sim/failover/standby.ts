// The standby role as the simulator runs it: a mirror of packages/daemon/src/roles/standby-role.ts,
// of the StandbyLink shell (packages/standby/src/standby-link.ts) and of refuseGuests, over
// the simulated process, timers and streams. The decisions are the real core's: the Receiver
// (with the real applier, wrapped to record what it applies), watchStandbyLease (the lease
// rule, eligibility, self-pause detection). A divergence never happens in a correct run: it
// fails the run.
import {
  ErrorCode,
  type PrimaryMessage,
  type StandbyMessage,
  watchStandbyLease,
} from "@vgpu-ha/common";
import { applyEntry, Receiver } from "@vgpu-ha/standby";
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
        const valid =
          message.kind === "hello" &&
          message.clusterId === CLUSTER &&
          message.epoch >= receiver.epoch;
        if (!valid) {
          conn.send({
            kind: "error",
            epoch: receiver.epoch,
            code:
              message.kind !== "hello" || message.epoch < receiver.epoch
                ? ErrorCode.STALE_EPOCH
                : ErrorCode.UNAUTHENTICATED,
            message: "a primary stream must start with a valid hello of this cluster",
          });
          conn.close("no valid hello");
          return;
        }
        if (this.link) this.link.close("replaced by a newer stream");
        this.link = conn;
        conn.send(receiver.hello());
      }
      if (message.epoch >= receiver.epoch) this.lastMessageMs = this.deps.proc.now();
      for (const out of receiver.step(message)) conn.send(out);
      this.afterStep();
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
    if (verdict === "woke") this.deps.stats.selfPauseDetected++;
    if (verdict === "woke" || verdict === "no-primary" || this.promoting) return;
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

  /** The replica to serve with; forced (recovery), whatever replica there is. */
  takeover(force = false): Takeover | undefined {
    const backend = this.receiver.backend;
    if (backend && (this.receiver.eligible || force)) {
      return { backend, lastSeq: this.receiver.appliedSeq };
    }
    return undefined;
  }

  probe() {
    return {
      role: "standby" as const,
      replica: this.receiver.eligible,
      appliedSeq: this.receiver.appliedSeq,
    };
  }

  private afterStep(): void {
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
          break;
        }
        case "staleEpoch":
          stats.staleEpochRefusals++;
          break;
        case "handover":
          this.parkGuests(2000);
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
