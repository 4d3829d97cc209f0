// The operator's role changes (vgpuctl promote, demote, switchover, reinit): each checks what
// the node is and refuses with a catalogue code, or asks the node driver and waits for the
// change to have run.
import { ErrorCode, VgpuError } from "@vgpu-ha/common";
import type { VgpuNode } from "./node.js";
import { OpsRefusal } from "./node-helpers.js";
import { codeOr } from "./ops/refusal.js";
import { PrimaryRole } from "./roles/primary-role.js";
import { StandbyRole } from "./roles/standby-role.js";

/**
 * Operator: promote this standby — refused while its primary may still hold its lease (it
 * spoke within a lease: PRIMARY_LEASED) or when the replica is not eligible, unless forced.
 * Forcing past a live primary makes two primaries; the lower epoch then discards its state.
 */
export async function manualPromote(
  node: VgpuNode,
  force: boolean,
  caller = "operator",
): Promise<Record<string, unknown>> {
  const standby = node.role;
  if (!(standby instanceof StandbyRole)) {
    throw new OpsRefusal(409, "not a standby", ErrorCode.NOT_STANDBY);
  }
  if (!force && !node.arbiter && standby.primaryInSight()) {
    throw new OpsRefusal(
      409,
      `the primary was heard from within the lease (${node.config.lease.durationMs} ms) and may still hold it: not promoting (use switchover on the primary, or force to override)`,
      ErrorCode.PRIMARY_LEASED,
    );
  }
  const why = standby.ineligibleReason();
  if (why && !force) {
    throw new OpsRefusal(
      409,
      `${why}: not promoting (force to override)`,
      ErrorCode.REPLICA_INELIGIBLE,
    );
  }
  let etcdEpoch: number | undefined;
  if (node.arbiter) {
    // etcd mode: even forced, a node serves only holding the leader key.
    const view = await node.arbiter.read();
    if (view.leader) {
      const held = `the etcd leader key is held by ${view.leader.nodeId}`;
      throw new OpsRefusal(409, held, ErrorCode.LEADER_KEY_HELD);
    }
    etcdEpoch = Math.max(view.record?.epoch ?? 0, node.epoch()) + 1;
    if (!(await node.arbiter.acquire(view, etcdEpoch, node.config.guest.listen))) {
      const lost = "another node took the etcd leader key first";
      throw new OpsRefusal(409, lost, ErrorCode.LEADER_KEY_HELD);
    }
  }
  node.history.askedBy = caller;
  node.promote(force ? "manual_forced" : "manual", force, etcdEpoch);
  await node.settled();
  return { role: node.role.name, epoch: node.epoch() };
}

/** Operator: hand over to the standby (a switchover); forced, step down even without one. */
export async function manualDemote(
  node: VgpuNode,
  force: boolean,
  caller = "operator",
): Promise<Record<string, unknown>> {
  const primary = node.role;
  if (!(primary instanceof PrimaryRole) || primary.name !== "primary") {
    throw new OpsRefusal(409, "not a primary", ErrorCode.NOT_PRIMARY);
  }
  node.history.askedBy = caller;
  try {
    return { ...(await primary.switchover()), role: "standby", epoch: node.epoch() };
  } catch (e) {
    if (!force) {
      node.history.askedBy = undefined;
      const why = `${(e as Error).message} (force to step down anyway)`;
      throw new VgpuError(codeOr(e, ErrorCode.HANDOVER_FAILED), why);
    }
    node.history.askedBy = caller;
    node.stepDown(node.epoch(), "demoted by an operator", "manual");
    await node.settled();
    return { role: node.role.name, epoch: node.epoch(), discarded: true };
  }
}

/** Operator: planned switchover. */
export async function switchover(
  node: VgpuNode,
  caller = "operator",
): Promise<Record<string, unknown>> {
  const primary = node.role;
  if (!(primary instanceof PrimaryRole) || primary.name !== "primary") {
    throw new OpsRefusal(409, "switchover runs on the primary", ErrorCode.NOT_PRIMARY);
  }
  node.history.askedBy = caller;
  try {
    const done = await primary.switchover();
    node.metrics.switchovers.inc();
    return { ...done, role: node.role.name, epoch: node.epoch() };
  } catch (e) {
    node.history.askedBy = undefined;
    throw new VgpuError(codeOr(e, ErrorCode.HANDOVER_FAILED), (e as Error).message);
  }
}

// ---- reinit ----

/**
 * Operator: this standby drops its replica and takes a fresh snapshot from its primary.
 * Refused on a primary, and while no primary is in sight (the replica may be the only copy)
 * unless forced.
 */
export async function reinit(
  node: VgpuNode,
  force: boolean,
  caller: string,
): Promise<Record<string, unknown>> {
  const standby = node.role;
  if (!(standby instanceof StandbyRole)) {
    throw new OpsRefusal(409, "reinit runs on a standby", ErrorCode.NOT_STANDBY);
  }
  if (!standby.primaryInSight() && !force) {
    throw new OpsRefusal(
      409,
      "no primary in sight to resync from: this replica may be the only copy (force to drop it anyway)",
      ErrorCode.NO_PRIMARY_IN_SIGHT,
    );
  }
  const dropped = standby.receiver.appliedSeq;
  node.log.warn({ seq: dropped, by: caller }, "reinit: dropping the replica for a fresh snapshot");
  node.history.askedBy = caller;
  node.driver.reinit();
  await node.settled();
  return { role: node.role.name, epoch: node.epoch(), droppedSeq: dropped };
}
