// The lease thread's etcd part: keeps the leader key's etcd lease alive with a client of its
// own, while the main loop turns (the watchdog), and publishes until when the lease surely
// holds. A lease etcd says is gone is reported to the main thread, which drops the key.
import { mayRenew } from "@vgpu-ha/common/lease-channel";
import { noop } from "cockatiel";
import { Etcd3 } from "etcd3";
import { EtcdKeepAlive } from "./etcd-keepalive.js";
import type { LeaseWorkerData } from "./lease-shared.js";

export interface EtcdWorkerPorts {
  readonly nowMs: () => number;
  readonly view: () => { mainProgressMs: number; renewing: boolean };
  readonly setEndMs: (endMs: number) => void;
  readonly answered: () => void;
  readonly post: (message: object) => void;
}

export class EtcdWorker {
  private readonly data: LeaseWorkerData;
  private readonly ports: EtcdWorkerPorts;
  private client: Etcd3 | undefined;
  private keeper: EtcdKeepAlive | undefined;

  constructor(data: LeaseWorkerData, ports: EtcdWorkerPorts) {
    this.data = data;
    this.ports = ports;
  }

  /** Keep `leaseId` alive (undefined: stop). */
  hold(leaseId: string | undefined): void {
    this.keeper?.stop();
    this.keeper = undefined;
    const e = this.data.etcd;
    if (leaseId === undefined || e === undefined) return;
    this.client ??= new Etcd3({
      hosts: [...e.endpoints],
      dialTimeout: e.requestTimeoutMs,
      faultHandling: { host: () => noop, global: noop },
    });
    const { ports } = this;
    let endMs = 0;
    this.keeper = new EtcdKeepAlive(this.client, {
      leaseId,
      keepaliveMs: e.keepaliveMs,
      requestTimeoutMs: e.requestTimeoutMs,
      driftMarginMs: e.driftMarginMs,
      nowMs: ports.nowMs,
      mayRenew: () => mayRenew(ports.nowMs(), ports.view(), this.data.watchdogMs),
      onEnd: (end) => {
        endMs = Math.max(endMs, end);
        ports.setEndMs(endMs);
        ports.answered();
      },
      onLost: () => ports.post({ kind: "etcdLost", leaseId }),
      onWarn: (message) => ports.post({ kind: "error", message }),
    });
  }

  close(): void {
    this.keeper?.stop();
    this.client?.close();
  }
}
