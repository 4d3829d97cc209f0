// The shipped standby role (packages/standby StandbyDriver) over the simulator's ports: the
// simulated process's clock and timers, its streams (an End as a Link), the simulated etcd,
// and the checker and counters as the observer. The receiver's applier is wrapped to record
// the lineage of each replica. A divergence never happens in a correct run: it fails the run.
import { create } from "@bufbuild/protobuf";
import { ErrorCode, type Link, type Supervisor, wire } from "@vgpu-ha/common";
import { applyEntry, type ReceiverEvent, StandbyDriver, type StandbyNote } from "@vgpu-ha/standby";
import type { EtcdView } from "./etcd.js";
import type { End } from "./net.js";
import { CLUSTER, type SimRoleDeps } from "./roles.js";
import { SimFailure } from "./world.js";

type GuestEnd = End<wire.NodeMessage, wire.GuestMessage>;

export type SimStandby = StandbyDriver<GuestEnd, EtcdView>;

export function simStandby(deps: SimRoleDeps): SimStandby {
  const where = `standby ${deps.node}`;
  const supervisor: Supervisor = {
    epoch: () => deps.supervisor.epoch(),
    promote: (reason, force, epoch) => deps.supervisor.promote(reason, force, epoch),
    stepDown: (theirEpoch, reason) => deps.supervisor.stepDown(theirEpoch, reason),
    adoptEpoch: (epoch) => deps.supervisor.adoptEpoch(epoch),
    probePeer: (done) => deps.probePeer(done),
    // The simulator has no maintenance mode.
    maintenancePaused: () => false,
    adoptMaintenance: () => undefined,
    deviceFailed: (failure) => deps.supervisor.deviceFailed(failure),
  };
  const driver: SimStandby = new StandbyDriver<GuestEnd, EtcdView>({
    receiver: {
      clusterId: CLUSTER,
      nodeId: deps.node,
      backendOptions: { ...deps.backendOptions, trackMmio: false },
      apply: (backend, entry) => {
        deps.lineages.follows(backend, entry, where);
        const result = applyEntry(backend, entry);
        if (result.ok) {
          deps.lineages.push(backend, entry);
        }
        return result;
      },
    },
    peerName: deps.peer,
    peerGuestAddress: deps.peer,
    configuredPrimary: deps.configured === "primary",
    lease: deps.params.lease,
    etcd: deps.arbiter ? { port: deps.arbiter, pollMs: deps.params.etcd!.pollMs } : undefined,
    now: () => deps.proc.now(),
    timers: deps.proc,
    supervisor,
    guests: {
      pause: (stream) => stream.pauseReading(), // its frames wait for the primary role
      refuse: (stream, redirect) => {
        const message = "this node is the standby";
        stream.send(
          create(wire.NodeMessageSchema, {
            kind: { case: "error", value: { code: ErrorCode.NOT_PRIMARY, message, redirect } },
          }),
        );
        stream.close("standby");
      },
    },
    logger: { info: () => undefined, warn: () => undefined },
    observer: {
      note: (n) => noted(deps, n),
      receiverEvent: (e, replaced) => receiverEvent(deps, driver, e, replaced),
    },
  });
  return driver;
}

function noted(deps: SimRoleDeps, n: StandbyNote): void {
  const { stats } = deps;
  switch (n.kind) {
    case "woke":
      stats.selfPauseDetected++;
      return;
    case "ineligible":
      stats.ineligibleExpiries++;
      return;
    case "etcdKeyAcquired":
      stats.etcdKeyAcquired++;
      return;
    case "awaitingBacklog":
      stats.takeoversAwaitingBacklog++;
      deps.backlogWaitBegan();
      return;
    case "backlogApplied":
      stats.backlogsApplied++;
      return;
    case "takeoverCalledOff":
      stats.takeoversCalledOff++;
      return;
    case "deviceFailed":
      if (n.takeoverDropped) stats.takeoversDroppedForDevice++;
      return;
    default:
      return;
  }
}

function receiverEvent(
  deps: SimRoleDeps,
  driver: SimStandby,
  e: ReceiverEvent,
  replaced: SimStandby["receiver"]["backend"],
): void {
  const r = driver.receiver;
  switch (e.kind) {
    case "divergence":
      throw new SimFailure(`standby ${deps.node} diverged at seq ${e.seq}: ${e.detail}`);
    case "snapshotDone": {
      const id = Number(e.detail.split(" ")[1]);
      deps.lineages.snapshotInstalled(id, e.seq, r.backend!);
      deps.stats.snapshotsInstalled++;
      if (replaced !== undefined) deps.checker.replaced(deps.node, replaced, r.epoch);
      return;
    }
    case "staleEpoch":
      deps.stats.staleEpochRefusals++;
      return;
    case "foreignReplica":
      deps.stats.foreignReplicasDropped++;
      if (lineageOnly(e.detail)) deps.stats.foreignByLineageOnly++;
      if (replaced !== undefined) deps.checker.replaced(deps.node, replaced, r.epoch);
      return;
    default:
      return;
  }
}

/**
 * A foreign replica told by its lineage alone: the replica a snapshot kept, or one no longer
 * than the primary's log (before lineages, only a longer one was caught).
 */
function lineageOnly(detail: string): boolean {
  if (detail.startsWith("kept replica of lineage")) return true;
  const m = /^lineage .* \(received (\d+), the primary's last seq (\d+)\)$/.exec(detail);
  return m !== null && Number(m[1]) <= Number(m[2]);
}

/** A simulated stream as the Link the shipped shells take (it never reports a full buffer). */
export function endLink<Out, In>(end: End<Out, In>): Link<Out, In> {
  return {
    send: (message) => {
      end.send(message);
      return end.isOpen;
    },
    onMessage: (handler) => end.onMessage(handler),
    onDrain: () => undefined,
    onClose: (handler) => end.onClose(handler),
    close: (reason) => end.close(reason),
  };
}

export function describeStandby(s: SimStandby): string {
  const r = s.receiver;
  return `standby@${r.epoch} ${r.state} applied ${r.appliedSeq}${r.granted ? " granted" : ""}${s.link.connected ? " linked" : ""}`;
}
