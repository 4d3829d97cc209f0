// What the daemon makes of the node driver's role changes: the role history, the logger bound
// to role and epoch, gRPC health, metrics (promotions, failovers, demotions, what a step-down
// discards) and the log lines an operator reads.
import type { CurrentRole, Logger, NodeMetrics, NodeObserver } from "@vgpu-ha/common";
import type { PrimaryRole } from "./roles/primary-role.js";
import type { StandbyRole } from "./roles/standby-role.js";

type Current = CurrentRole<PrimaryRole, StandbyRole>;

/** The node as its observer sees it. */
export interface ObservedNode {
  readonly baseLog: Logger;
  log: Logger;
  readonly metrics: NodeMetrics;
  epoch(): number;
  /** The role history: `from` is the role being left. */
  record(to: string, reason: string, from: Current): void;
  /** gRPC health: the guest port serves on a primary, the replication port on a standby. */
  setServing(kind: Current["kind"]): void;
}

export function nodeObserver(node: ObservedNode): NodeObserver<PrimaryRole, StandbyRole> {
  const rebind = (role: string) => {
    // The epoch is bound to the logger (a field of the same name would repeat the key).
    node.log = node.baseLog.child({ role, epoch: node.epoch() });
  };
  return {
    persisted: () => undefined,
    note: (n, current) => {
      switch (n.kind) {
        case "promoting": {
          rebind("primary");
          const seq = current.role.probe().appliedSeq;
          node.log.warn({ seq, reason: n.reason }, "promoting");
          return;
        }
        case "recoveryTakeover":
        case "recoveryStart":
          node.log.warn(
            { peer: n.peer, decided: n.kind },
            "no primary in sight and the peer holds nothing",
          );
          return;
        case "recoveryAwaitingBacklog":
          node.log.warn(
            { entries: n.entries },
            "no primary in sight and the peer holds nothing: taking over once the device applied its backlog",
          );
          return;
        case "maintenanceHold":
          node.log.warn(
            { peer: n.peer },
            "maintenance mode: not taking over (vgpuctl resume to allow it)",
          );
          return;
        case "etcdStart":
          node.log.warn({ decision: n.reason }, "etcd: starting");
          return;
        case "etcdUnreachable":
          node.log.error({ err: n.error }, "etcd: unreachable at start: standby");
          return;
        default:
          return;
      }
    },
    changing: (to, reason, from) => {
      node.record(to, reason, from);
      rebind(to);
    },
    steppingDown: (primary, s, to) => {
      const { metrics } = node;
      const state = primary.stateOnStepDown(s.kept);
      const d = s.discarded;
      metrics.demotions.inc({ reason: to });
      metrics.splitBrainDiscards.inc({ what: "frames" }, d.frames);
      metrics.splitBrainDiscards.inc({ what: "acknowledged_frames" }, d.acknowledgedFrames);
      metrics.splitBrainDiscards.inc({ what: "sessions" }, d.sessions);
      metrics.stateDiscards.inc({ what: "sessions" }, state.sessions);
      metrics.stateDiscards.inc({ what: "contexts" }, state.contexts);
      metrics.stateDiscards.inc({ what: "vram_bytes" }, state.vramBytes);
      metrics.stateDiscards.inc({ what: "entries" }, state.entries);
      const theirEpoch = s.theirEpoch;
      if (s.kept) {
        const seq = primary.probe().appliedSeq;
        node.log.warn(
          { seq, theirEpoch },
          `stepping down after a handover: ${s.reason}; keeping the replica`,
        );
      } else {
        node.log.error(
          { seq: primary.log.lastSeq, theirEpoch, discarded: d, state },
          `stepping down to standby: ${s.reason}; discarding this node's state`,
        );
      }
    },
    became: (current, reason) => {
      const kind = current.kind;
      node.setServing(kind);
      if (kind !== "standby") node.metrics.promotions.inc({ reason });
      if (reason === "lease_expired" || reason === "etcd_key_acquired")
        node.metrics.failovers.inc();
      node.log.warn({ reason }, `now ${kind}`);
    },
  };
}
