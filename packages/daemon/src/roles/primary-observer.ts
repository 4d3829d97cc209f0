// The daemon's observer of the primary role: the PrimaryDriver's notices and the Sender's
// events as pino log lines and prom-client metrics (the simulator observes the same hooks
// with its stats and checker).
import { errorName, type Logger, type NodeMetrics } from "@vgpu-ha/common";
import { digestWhenDone } from "@vgpu-ha/gpu-model";
import type { PrimaryObserver, Sender, SenderEvent, Sequencer } from "@vgpu-ha/primary";
import type { ReplicationRefusals } from "../replication-refusals.js";

export interface PrimaryObserverDeps {
  readonly logger: Logger;
  readonly metrics: NodeMetrics;
  readonly refusals: ReplicationRefusals;
  /** The peer's replication address (where outbound refusals are counted against). */
  readonly peerAddress: string;
  readonly sender: () => Sender | undefined;
  readonly sequencer: () => Sequencer;
  /** Whether the role has stopped (no digest warming after). */
  readonly stopped: () => boolean;
  /** A verify() waits for its checkpoint's answer. */
  readonly checkpoint: (e: SenderEvent & { kind: "checkpoint" }) => void;
}

export function primaryObserver(deps: PrimaryObserverDeps): PrimaryObserver {
  const { logger, metrics } = deps;
  let digestWarm = false;
  let lastMmio = { storesSeen: 0, pageBatches: 0, pagesShipped: 0, bytesShipped: 0 };
  return {
    notice(n, seq) {
      switch (n.kind) {
        case "leaseChanged": {
          const fields = { seq, from: n.from, to: n.to };
          if (n.to === "leased") logger.warn(fields, "lease held: replicating");
          else if (n.to === "fenced") logger.warn(fields, "lease lapsed: holding replies (fenced)");
          else logger.error(fields, "no standby: serving alone (degraded)");
          break;
        }
        case "grantChanged":
          logger.info(
            { seq, appliedSeq: deps.sender()?.appliedSeq },
            n.granted ? "standby granted: it may take over" : "standby's grant revoked",
          );
          if (n.granted) warmDigest();
          break;
        case "etcdNamed":
          logger.info({ seq }, "etcd: standby named: it may take over");
          warmDigest();
          break;
        case "etcdCleared":
          logger.error({ seq }, "etcd: standby no longer named: serving alone");
          break;
        case "keyRetaken":
          // `keyEpoch`: the logger already binds `epoch` (a repeated key would be invalid JSON).
          logger.warn({ seq, keyEpoch: n.epoch }, "etcd: took the key back");
          break;
        case "handoverAccepted":
          logger.info({ seq }, "switchover: the standby accepted");
          break;
      }
    },
    senderEvent(e, seq) {
      senderEvent(deps, e, seq);
    },
    snapshotStarted(source) {
      logger.warn(
        { seq: source.atSeq, snapshot: source.snapshotId, contexts: source.meta.contexts.length },
        "snapshot started",
      );
    },
    hello(decision, remote) {
      if (decision.kind === "refuse") deps.refusals.report(decision.refusal, remote, "inbound");
    },
    snapshotPull(decision, remote) {
      if (decision.kind === "serve") {
        const from = decision.chunks[0]?.index;
        logger.info({ snapshot: decision.snapshotId, from, remote }, "snapshot pull opened");
      } else if (decision.reason !== undefined) {
        const { reason, message } = decision;
        deps.refusals.report({ reason, message }, remote, "inbound");
      } else {
        logger.warn(
          { code: errorName(decision.code), remote },
          `snapshot pull refused: ${decision.message}`,
        );
      }
    },
    guestMessage() {
      const c = deps.sequencer().mmioCounters;
      metrics.mmioPageBatches.inc(c.pageBatches - lastMmio.pageBatches);
      metrics.mmioPagesShipped.inc(c.pagesShipped - lastMmio.pagesShipped);
      metrics.mmioBytesShipped.inc(c.bytesShipped - lastMmio.bytesShipped);
      lastMmio = { ...c };
    },
    etcdFailed(error) {
      logger.warn({ err: error.message }, "etcd: request failed");
    },
    handingOver(seq, digest) {
      logger.warn({ seq, digest }, "switchover: handing over");
    },
  };

  /**
   * Once a standby is granted (a switchover becomes possible), computes the state digest once
   * off the switchover's path: its first run in a process is several times slower (code not
   * yet compiled), and a switchover's pause waits for one.
   */
  function warmDigest(): void {
    if (digestWarm) return;
    digestWarm = true;
    setImmediate(() => {
      if (!deps.stopped()) digestWhenDone(deps.sequencer().backend, () => {});
    });
  }
}

function senderEvent(deps: PrimaryObserverDeps, e: SenderEvent, seq: number): void {
  const { logger, metrics } = deps;
  switch (e.kind) {
    case "snapshotStarted":
      metrics.snapshots.inc({ event: "started" });
      break;
    case "snapshotResumed":
      metrics.snapshots.inc({ event: "resumed" });
      logger.warn({ seq, snapshot: e.snapshotId, chunk: e.chunk }, "snapshot resumed");
      break;
    case "snapshotDone": {
      const last = deps.sender()!.lastSnapshot!;
      metrics.snapshots.inc({ event: "completed" });
      metrics.snapshotBytes.inc(last.bytes);
      metrics.snapshotDuration.observe(last.seconds);
      logger.warn({ seq: e.atSeq, snapshot: e.snapshotId, ...last }, "snapshot completed");
      break;
    }
    case "resumed":
      metrics.resumes.inc();
      logger.warn({ seq: e.fromSeq }, "standby resumed from the retained log");
      break;
    case "resync":
      logger.warn({ seq, reason: e.reason, detail: e.detail }, "standby asked for a resync");
      if (e.reason === "diverged") metrics.divergences.inc();
      break;
    case "refused":
      if (e.reason !== undefined) {
        deps.refusals.report(
          { reason: e.reason, message: e.message },
          deps.peerAddress,
          "outbound",
        );
      } else {
        logger.error({ seq, code: e.code, message: e.message }, "standby refused us");
      }
      break;
    case "higherEpoch":
      metrics.staleEpochRefusals.inc();
      break;
    case "checkpoint":
      deps.checkpoint(e);
      break;
    case "handoverAccepted":
      break;
  }
}
