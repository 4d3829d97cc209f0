// The primary role as the simulator runs it: the shipped PrimaryDriver (packages/primary) over
// the simulated process (clock, timers), the simulated network (the peer link), the simulated
// etcd (SimArbiter is the etcd port), the simulator's guest service as the guest port, and the
// stats and checker as the observer — as packages/daemon/src/roles/primary-role.ts composes it
// over gRPC, Node timers, etcd, pino and prom-client. What is here is the simulation's: the
// checker's tenure and release tags, and the translation of its streams to Links.
import {
  errorName,
  type GuestLink,
  type Link,
  type PrimaryMessage,
  type StandbyMessage,
} from "@vgpu-ha/common";
import { Backend } from "@vgpu-ha/gpu-model";
import {
  GuestService,
  PrimaryDriver,
  type PrimaryLease,
  type PrimaryObserver,
  TenantAuth,
} from "@vgpu-ha/primary";
import type { ReleaseTag } from "./checker.js";
import { LineageLog } from "./lineage.js";
import type { End } from "./net.js";
import { CLUSTER, GUEST_TOKEN, type SimRoleDeps, simObservability } from "./roles.js";
import { SimFailure } from "./world.js";

export interface Takeover {
  readonly backend: Backend;
  readonly lastSeq: number;
}

const SWITCHOVER_TIMEOUT_MS = 10_000;

export class SimPrimary {
  readonly name = "primary" as const;
  readonly deps: SimRoleDeps;
  /** This role instance, for the checker (one per node, epoch and promotion). */
  readonly tenure: number;
  readonly epochAtStart: number;
  readonly driver: PrimaryDriver<GuestLink>;
  readonly guests: GuestService;
  private readonly promoted: boolean;
  private nextSession = 1;
  /** Counts the stretches without the lease (for the checker's tags). */
  private soloPeriod = 0;

  constructor(deps: SimRoleDeps, takeover?: Takeover) {
    this.deps = deps;
    this.promoted = takeover !== undefined;
    this.tenure = deps.checker.newTenure();
    this.epochAtStart = deps.supervisor.epoch();
    const { params, proc } = deps;
    const backend = takeover?.backend ?? new Backend(deps.backendOptions);
    const label = `primary ${deps.node}#${this.tenure}`;
    let guests: GuestService | undefined;
    this.driver = new PrimaryDriver<GuestLink>(
      {
        clusterId: CLUSTER,
        nodeId: deps.node,
        peerName: deps.peer,
        configuredPrimary: deps.configured === "primary",
        mode: params.ackMode,
        lease: params.lease,
        etcdPollMs: params.etcd?.pollMs,
        maxLagEntries: params.maxLagEntries,
        maxLagBytes: Number.POSITIVE_INFINITY,
        maxLagMs: params.lease.leaseMs * 0.4,
        maxApplyLagMs: params.lease.leaseMs,
        mmio: { mmio: params.mmio, flushBytes: params.flushBytes },
        flushDelayMs: params.flushDelayMs,
        sender: params.sender,
        reconnectMs: params.reconnectMs,
        snapshotChunkBytes: params.snapshotChunkBytes,
      },
      {
        clock: { monotonicMs: () => proc.now(), wallMs: () => proc.wallMs() },
        timers: proc,
        supervisor: deps.supervisor,
        backend,
        log: new LineageLog(takeover?.lastSeq ?? 0, deps.lineages, backend, label),
        // Deterministic and unique per primary role (a history starts only in a fresh one).
        newLineage: () => `sim-history-${this.tenure}`,
        dialPeer: () => asLink(deps.dialPeer()),
        guests: (hooks) => {
          const tenants = [...deps.backendOptions.tenants.keys()];
          guests = new GuestService({
            ...hooks,
            ...simObservability(),
            auth: new TenantAuth(tenants.map((name) => ({ name, token: GUEST_TOKEN }))),
            nodeId: deps.node,
            epoch: () => deps.supervisor.epoch(),
            maxFramesInFlight: 1024,
            maxMessageBytes: 64 << 20,
            redirect: () => deps.peer,
            clusterId: CLUSTER,
            timers: proc,
            defer: (fn) => proc.defer(fn),
            nowMs: () => proc.now(),
            cpuMs: () => proc.now(),
            newSessionId: () => `${deps.node}${deps.supervisor.epoch()}-${this.nextSession++}`,
            onReply: (_link, message, released) => {
              if (released.length === 0) return; // an error or Closed releases nothing
              deps.checker.released(this, released);
              deps.checker.tagReply(message, this.tag());
            },
          });
          return guests;
        },
        etcd: deps.arbiter,
        observer: this.observer(),
      },
      this.promoted,
    );
    this.guests = guests!;
    deps.checker.tenureStarted(this);
  }

  private observer(): PrimaryObserver {
    const { stats, checker } = this.deps;
    return {
      notice: (n) => {
        if (n.kind === "keyRetaken") stats.etcdKeyRetaken++;
        if (n.kind !== "leaseChanged") return;
        if (n.to === "leased") this.soloPeriod++;
        if (n.to === "degraded") stats.degradedPeriods++;
        if (n.to === "fenced") stats.fencedPeriods++;
        checker.leaseStep(this, n.to);
      },
      senderEvent: (e) => {
        if (e.kind === "snapshotStarted") stats.snapshotsStarted++;
        else if (e.kind === "resumed") stats.resumedFromLog++;
        else if (e.kind === "higherEpoch") stats.staleEpochRefusals++;
        else if (e.kind === "handoverAccepted") stats.handoversAccepted++;
        else if (e.kind === "checkpoint") {
          throw new SimFailure(`checkpoint event without a checkpoint: ${JSON.stringify(e)}`);
        }
      },
      snapshotStarted: (source, backend) => {
        this.deps.lineages.snapshotTaken(source.snapshotId, source.atSeq, backend);
      },
      hello: (decision) => {
        if (decision.kind !== "refuse") stats.primariesMet++;
      },
      guestMessage: () => undefined,
      etcdFailed: () => undefined,
      handingOver: () => undefined,
    };
  }

  get backend(): Backend {
    return this.driver.backend;
  }

  get log(): LineageLog {
    return this.driver.log as LineageLog;
  }

  get sequencer() {
    return this.driver.sequencer;
  }

  get sender() {
    return this.driver.sender!;
  }

  get lease(): PrimaryLease {
    return this.driver.lease as PrimaryLease;
  }

  start(): void {
    this.driver.start();
    if (this.promoted) this.deps.checker.leaseStep(this, this.lease);
  }

  stop(reason: string): void {
    this.driver.stop(reason);
  }

  /** The checker's tag for a reply released now. */
  tag(): ReleaseTag {
    return {
      tenure: this.tenure,
      soloPeriod: this.soloPeriod,
      // Serving without its peer lease (peer mode: degraded; etcd mode: on the key alone).
      degraded: this.lease !== "leased",
      excused: this.deps.checker.excused,
    };
  }

  /** The lease as a release judged now would see it (the checker's view of this primary). */
  effectiveLease(): PrimaryLease {
    return this.driver.effectiveLease() as PrimaryLease;
  }

  soloWork() {
    return this.driver.soloWork();
  }

  /** Another primary dials us: the driver decides on its hello. */
  acceptReplication(link: End<StandbyMessage, PrimaryMessage>): void {
    this.driver.acceptReplication(asLink(link), this.deps.peer);
  }

  probe() {
    return { role: "primary" as const, replica: false, appliedSeq: this.log.lastSeq };
  }

  /** A planned switchover; the refusal, if any. `settled` is told "done" or why it failed. */
  switchover(settled: (outcome: string) => void): string | undefined {
    const refusal = this.driver.switchover(SWITCHOVER_TIMEOUT_MS, (o) =>
      settled(o.ok ? "done" : o.why),
    );
    return refusal && (refusal.message ?? errorName(refusal.code));
  }

  handedOver(): Takeover | undefined {
    return this.driver.handedOver();
  }

  steppedDown(): void {
    this.driver.steppedDown();
  }

  describe(): string {
    const s = this.sender;
    const g = this.driver.machine!.grant;
    const grant = g.granted ? " granted" : g.revokedAtUs !== undefined ? " revoking" : "";
    return `primary@${this.deps.supervisor.epoch()} ${this.lease} log ${this.log.lastSeq} sender ${s.state}/${s.appliedSeq}${grant} held ${this.guests.heldReplies}${this.guests.isPaused ? " paused" : ""}${this.driver.handingOver ? " handing-over" : ""}`;
  }
}

/** A simulated stream as a Link (its buffer never fills: no drain to wait for). */
function asLink<Out, In>(end: End<Out, In>): Link<Out, In> {
  return {
    send: (m) => {
      end.send(m);
      return true;
    },
    onMessage: (h) => end.onMessage(h),
    onDrain: () => undefined,
    onClose: (h) => end.onClose(h),
    close: (reason) => end.close(reason),
  };
}
