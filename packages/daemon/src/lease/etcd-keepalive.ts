// Keeps one etcd lease alive on a keepalive stream and tracks, on a monotonic clock, until when
// it surely holds: the send time of the newest answered keepalive plus the granted TTL minus the
// drift margin. Used by the main thread's EtcdArbiter and by the lease thread (lease-worker.ts),
// each with its own etcd client: the lease thread's copy keeps the key while the main loop is
// busy (within the watchdog), the arbiter's copy keeps it if the thread is gone.
import { etcdLeaseEndMs } from "@vgpu-ha/common/etcd-lease";
import type { Etcd3 } from "etcd3";

type KeepAliveStream = Awaited<ReturnType<Etcd3["leaseClient"]["leaseKeepAlive"]>>;

export interface EtcdKeepAliveOptions {
  readonly leaseId: string;
  readonly keepaliveMs: number;
  readonly requestTimeoutMs: number;
  readonly driftMarginMs: number;
  /** Monotonic ms. */
  readonly nowMs: () => number;
  /** Whether to send the next keepalive now (the lease thread's watchdog); default always. */
  readonly mayRenew?: () => boolean;
  /** The lease's safe end moved (monotonic ms). */
  onEnd(endMs: number): void;
  /** etcd says the lease is gone (expired or revoked). */
  onLost(): void;
  onWarn(message: string): void;
}

export class EtcdKeepAlive {
  private readonly client: Etcd3;
  private readonly o: EtcdKeepAliveOptions;
  private readonly timer: NodeJS.Timeout;
  private stream: KeepAliveStream | undefined;
  private opening = false;
  private readonly sent: number[] = [];
  private stopped = false;

  constructor(client: Etcd3, options: EtcdKeepAliveOptions) {
    this.client = client;
    this.o = options;
    this.timer = setInterval(() => this.keepAlive(), options.keepaliveMs);
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.closeStream();
  }

  /** Sends one keepalive on the stream (opening it when needed); answers arrive in order. */
  private keepAlive(): void {
    if (this.stopped || this.opening) return;
    if (this.o.mayRenew && !this.o.mayRenew()) return;
    const now = this.o.nowMs();
    // An answer overdue: the stream is stuck; start over on a new one.
    if (this.sent.length > 0 && now - this.sent[0]! > this.o.requestTimeoutMs) this.closeStream();
    if (!this.stream) {
      this.open();
      return;
    }
    this.sent.push(now);
    this.stream.write({ ID: this.o.leaseId });
  }

  private open(): void {
    this.opening = true;
    this.client.leaseClient
      .leaseKeepAlive()
      .then((stream) => {
        this.opening = false;
        if (this.stopped) {
          stream.end();
          return;
        }
        this.stream = stream;
        stream.on("data", (res: { TTL: string }) => this.onAnswer(stream, res));
        stream.on("error", () => this.stream === stream && this.closeStream());
        stream.on("end", () => this.stream === stream && this.closeStream());
        this.keepAlive();
      })
      .catch((err: Error) => {
        this.opening = false;
        this.o.onWarn(`etcd: keepalive stream failed to open: ${err.message}`);
      });
  }

  private onAnswer(stream: KeepAliveStream, res: { TTL: string }): void {
    if (stream !== this.stream || this.stopped) return;
    const sentMs = this.sent.shift();
    if (sentMs === undefined) return;
    const ttlS = Number(res.TTL);
    if (!(ttlS > 0)) {
      this.stop();
      this.o.onLost();
      return;
    }
    this.o.onEnd(etcdLeaseEndMs(sentMs, ttlS * 1000, this.o.driftMarginMs));
  }

  private closeStream(): void {
    const s = this.stream;
    this.stream = undefined;
    this.sent.length = 0;
    if (s) {
      s.on("error", () => undefined);
      s.end();
    }
  }
}
