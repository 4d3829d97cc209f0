// The lease thread's start (peer mode with lease.watchdogMs > 0: heartbeats on the
// replication port over UDP, on a thread of their own; etcd mode: the etcd lease's keepalive).
import type { Config, Logger } from "@vgpu-ha/common";
import { splitHostPort } from "../node-helpers.js";
import type { EtcdArbiter } from "./etcd-arbiter.js";
import { LeaseThread } from "./lease-thread.js";

/** Peer mode with lease.watchdogMs > 0: the lease thread, on the replication port over UDP. */
export function startLeaseThread(
  config: Config,
  port: number | undefined,
  arbiter: EtcdArbiter | undefined,
  mainNowMs: () => number,
  log: Logger,
): LeaseThread | undefined {
  if (port === undefined || config.lease.watchdogMs === 0) return undefined;
  const peerAddress = config.peer.leaseAddress ?? config.peer.replicationAddress;
  const [peerHost, peerPort] = peerAddress ? splitHostPort(peerAddress) : [];
  const [bindHost] = splitHostPort(config.replication.listen);
  const e = config.lease.etcd;
  const thread = new LeaseThread(
    {
      mode: config.lease.mode,
      etcd: {
        endpoints: e.endpoints,
        keepaliveMs: e.keepaliveMs,
        requestTimeoutMs: e.requestTimeoutMs,
        driftMarginMs: config.lease.driftMarginMs,
      },
      bindHost,
      bindPort: port,
      peer:
        peerHost !== undefined && peerPort !== undefined
          ? { host: peerHost, port: peerPort }
          : undefined,
      heartbeatMs: config.lease.heartbeatMs,
      watchdogMs: config.lease.watchdogMs,
      progressEveryMs: Math.max(5, Math.min(50, Math.floor(config.lease.heartbeatMs / 2))),
      mainNowMs,
    },
    log,
  );
  if (arbiter) {
    // etcd mode: the thread keeps the leader key's lease alive beside the main loop.
    arbiter.onHolding = (lease) => thread.etcd(lease?.leaseId);
    arbiter.threadEndMs = () => thread.etcdEndMs();
    thread.onEtcdLost = (id) => arbiter.lost(id);
  }
  return thread;
}
