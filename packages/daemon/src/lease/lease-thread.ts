// The main thread's handle on the lease thread (lease-worker.ts): starts it, tells it the
// node's role (with the key of the primary's stream), keeps the watchdog fed while the main loop
// turns, and reads back what the lease channel saw, converted to the main clock. If the thread
// fails, the node carries on with the lease on the replication stream alone (what it renews
// is only ever added to that lease: nothing depends on it for safety) and says so loudly.
import { randomBytes } from "node:crypto";
import { Worker } from "node:worker_threads";
import type { Logger } from "@vgpu-ha/common";
import {
  type LeaseRoleMessage,
  type LeaseWorkerData,
  monotonicUs,
  SLOT_COUNT,
  Slot,
} from "./lease-shared.js";

export interface LeaseThreadOptions {
  readonly mode: "peer" | "etcd";
  readonly etcd?: LeaseWorkerData["etcd"];
  readonly bindHost: string;
  readonly bindPort: number;
  readonly peer: { readonly host: string; readonly port: number } | undefined;
  readonly heartbeatMs: number;
  readonly watchdogMs: number;
  /** How often the main loop proves it turns. */
  readonly progressEveryMs: number;
  /** The main clock (performance.now()) at this moment, to convert the thread's figures. */
  readonly mainNowMs: () => number;
}

export interface LeaseChannelCounts {
  readonly up: boolean;
  readonly heartbeatsSent: number;
  readonly acksTaken: number;
  readonly heartbeatsTaken: number;
  readonly refused: number;
  readonly etcdKeepalivesAnswered: number;
}

export class LeaseThread {
  private readonly worker: Worker;
  private readonly shared: BigInt64Array;
  private readonly progress: NodeJS.Timeout;
  private readonly options: LeaseThreadOptions;
  private generation = 0;
  private failed = false;
  private closed = false;
  /** etcd mode: etcd said the lease the thread kept alive is gone. */
  onEtcdLost: ((leaseId: string) => void) | undefined;

  constructor(options: LeaseThreadOptions, log: Logger) {
    this.options = options;
    const buffer = new SharedArrayBuffer(SLOT_COUNT * 8);
    this.shared = new BigInt64Array(buffer);
    const data: LeaseWorkerData = {
      shared: buffer,
      mode: options.mode,
      ...(options.etcd ? { etcd: options.etcd } : {}),
      bindHost: options.bindHost,
      bindPort: options.bindPort,
      peerHost: options.peer?.host,
      peerPort: options.peer?.port,
      heartbeatMs: options.heartbeatMs,
      watchdogMs: options.watchdogMs,
    };
    this.feed();
    this.worker = new Worker(new URL("./lease-worker.js", import.meta.url), { workerData: data });
    this.worker.unref();
    this.worker.on("message", (m: { kind: string; message?: string; leaseId?: string }) => {
      if (m.kind === "up")
        log.info({ mode: options.mode, port: options.bindPort }, "lease thread up");
      else if (m.kind === "etcdLost") this.onEtcdLost?.(m.leaseId ?? "");
      else log.warn({ err: m.message }, "lease thread");
    });
    const fail = (why: string) => {
      if (this.closed) return;
      this.failed = true;
      log.error({ why }, "lease thread stopped: the lease rides on the replication stream alone");
    };
    this.worker.on("error", (e) => fail(e.message));
    this.worker.on("exit", (code) => fail(`exit ${code}`));
    this.progress = setInterval(() => this.feed(), options.progressEveryMs);
    this.progress.unref();
  }

  /** A fresh key for a primary's stream (sent in its hello). */
  static newKey(): Uint8Array {
    return new Uint8Array(randomBytes(32));
  }

  /** The watchdog: the main loop turned now. */
  private feed(): void {
    Atomics.store(this.shared, Slot.mainProgressUs, monotonicUs());
  }

  /** Primary: renew with this key and epoch while `renewing` says the stream is up. */
  primary(key: Uint8Array, epoch: number): void {
    this.send({ kind: "primary", generation: ++this.generation, key, epoch });
  }

  /** Standby: take heartbeats under the key of the primary stream it follows. */
  standby(key: Uint8Array, epoch: number): void {
    if (key.length === 0) return; // a primary without a lease thread
    this.send({ kind: "standby", generation: ++this.generation, key, epoch });
  }

  /** etcd mode: keep this etcd lease alive while the main loop turns (undefined: stop). */
  etcd(leaseId: string | undefined): void {
    this.setRenewing(leaseId !== undefined);
    if (leaseId === undefined) this.send({ kind: "none", generation: ++this.generation });
    else this.send({ kind: "etcd", generation: ++this.generation, leaseId });
  }

  /** etcd mode: until when (main clock) the thread's keepalives say the lease holds. */
  etcdEndMs(): number | undefined {
    return this.current(Slot.etcdEndUs);
  }

  none(): void {
    this.setRenewing(false);
    this.send({ kind: "none", generation: ++this.generation });
  }

  setRenewing(renewing: boolean): void {
    Atomics.store(this.shared, Slot.renewing, renewing ? 1n : 0n);
  }

  /** Primary: the send time (main clock) of the newest heartbeat acknowledged on the channel. */
  ackedSentMs(): number | undefined {
    return this.current(Slot.ackedSentUs);
  }

  /** Standby: when (main clock) the channel last brought a heartbeat of its primary. */
  heardMs(): number | undefined {
    return this.current(Slot.heardUs);
  }

  counts(): LeaseChannelCounts {
    const n = (slot: number) => Number(Atomics.load(this.shared, slot));
    return {
      up: !this.failed && n(Slot.up) === 1,
      heartbeatsSent: n(Slot.heartbeatsSent),
      acksTaken: n(Slot.acksTaken),
      heartbeatsTaken: n(Slot.heartbeatsTaken),
      refused: n(Slot.refused),
      etcdKeepalivesAnswered: n(Slot.etcdAnswers),
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.progress);
    this.send({ kind: "close" });
    await this.worker.terminate();
  }

  /** A worker figure of the current role, on the main clock (undefined: none, or stale). */
  private current(slot: number): number | undefined {
    if (this.failed) return undefined;
    const generation = Number(Atomics.load(this.shared, Slot.workerGeneration));
    if (generation !== this.generation) return undefined;
    const us = Atomics.load(this.shared, slot);
    if (us === 0n) return undefined;
    const offsetMs = this.options.mainNowMs() - Number(monotonicUs()) / 1000;
    return Number(us) / 1000 + offsetMs;
  }

  private send(m: LeaseRoleMessage): void {
    if (!this.failed) this.worker.postMessage(m);
  }
}
