// What the primary role shows operators: /v1/status, the replication gauges and readiness,
// read off the PrimaryDriver and its machine.
import {
  type Clock,
  type Config,
  NO_REPLICATION,
  type ReplicationGauges,
  resyncProgress,
} from "@vgpu-ha/common";
import type { PrimaryDriver } from "@vgpu-ha/primary";
import type { EtcdArbiter } from "../lease/etcd-arbiter.js";
import type { Readiness } from "../ops/ops-app.js";

export interface PrimaryStatusDeps {
  readonly name: "primary" | "standalone";
  readonly config: Config;
  readonly clock: Clock;
  readonly arbiter: EtcdArbiter | undefined;
  readonly driver: PrimaryDriver<unknown>;
  readonly connected: () => boolean;
}

type ShownLease = "alone" | "leased" | "fenced" | "degraded";

export function primaryStatus(deps: PrimaryStatusDeps) {
  const { driver, config } = deps;
  const sender = driver.sender;
  const machine = driver.machine;
  const guests = driver.guests;
  const log = driver.log;

  /** A standby is attached (streaming, or taking a snapshot): lag means something. */
  const standbyAttached = () => sender?.state === "streaming" || sender?.state === "snapshot";

  /** The lease state shown to operators (etcd: fenced without the key's lease, degraded when serving without a named standby). */
  const leaseState = (): ShownLease => {
    if (!deps.arbiter || !machine) return driver.lease;
    if (driver.effectiveLease() === "fenced") return "fenced";
    // Without a named standby no failover is possible: degraded, even while the stream looks
    // up (a blackholed TCP connection stays "streaming" for seconds after a partition heals).
    return machine.grant.granted ? "leased" : "degraded";
  };

  const replicationGauges = (): ReplicationGauges => {
    if (!sender || !machine) {
      return { ...NO_REPLICATION, lastSeq: log.lastSeq, acknowledgedSeq: guests.ackedSeq };
    }
    const now = deps.clock.monotonicMs();
    const lag = log.lagAfter(sender.appliedSeq, now);
    const endMs = machine.servingLeaseEndMs(driver.facts());
    return {
      lastSeq: log.lastSeq,
      appliedSeq: sender.appliedSeq,
      acknowledgedSeq: guests.ackedSeq,
      lagEntries: lag.entries,
      lagBytes: lag.bytes,
      lagSeconds: lag.seconds,
      connected: deps.connected(),
      snapshotInProgress: sender.state === "snapshot",
      eligible: false,
      degraded: leaseState() === "degraded",
      leaseRemainingSeconds: Math.max(0, (endMs - now) / 1000),
    };
  };

  const readiness = (): Readiness => {
    if (driver.stopped) return { ready: false, reason: "shutting down" };
    const state = leaseState();
    if (state === "fenced")
      return { ready: false, reason: "primary without lease: holding replies" };
    return { ready: true, reason: `${deps.name} and serving (${state})` };
  };

  /** The snapshot in progress with its resync figures (bytes, %, rate, ETA); null when none. */
  const snapshotStatus = () => {
    const p = sender?.snapshotProgress;
    if (!p) return null;
    const { startedMs: _monotonic, ...rest } = p;
    return { ...rest, ...resyncProgress(p, deps.clock.monotonicMs()) };
  };

  const status = (): Record<string, unknown> => {
    const r = replicationGauges();
    const c = driver.sequencer.mmioCounters;
    return {
      role: deps.name,
      serving: !driver.stopped,
      // The history this node's state belongs to (common core/lineage.ts); a primary always has one.
      lineage: driver.backend.lineage || null,
      lease: sender
        ? {
            mode: config.lease.mode,
            state: leaseState(),
            remainingSeconds: r.leaseRemainingSeconds,
            standbyGranted: machine?.grant.granted ?? false,
            ...(deps.arbiter ? { etcdKeyHeld: deps.arbiter.holding } : {}),
          }
        : null,
      degraded: r.degraded,
      seq: {
        last: r.lastSeq,
        applied: r.appliedSeq,
        received: sender?.receivedSeq ?? 0,
        acknowledged: r.acknowledgedSeq,
      },
      replication: sender
        ? {
            mode: config.replication.mode,
            peer: config.peer.name,
            peerAddress: config.peer.replicationAddress,
            peerVersion: sender.peerVersion ?? null,
            state: sender.state,
            connected: r.connected,
            // No standby: no lag to speak of (the numbers would only grow).
            standby: standbyAttached() ? "attached" : "none",
            lag: standbyAttached()
              ? { entries: r.lagEntries, bytes: r.lagBytes, seconds: r.lagSeconds }
              : null,
            heldReplies: guests.heldReplies,
            snapshot: snapshotStatus(),
            lastSnapshot: sender.lastSnapshot ?? null,
            log: {
              firstRetainedSeq: log.firstRetainedSeq,
              heldEntries: log.heldEntries,
              heldBytes: log.heldBytes,
            },
          }
        : null,
      mmio: { mode: config.mmio.replication, ...c },
      guestStreams: guests.openStreams,
    };
  };

  return { leaseState, replicationGauges, readiness, status };
}
