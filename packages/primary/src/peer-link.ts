// The primary's replication shell, over ports: dials the standby (a Link: gRPC in the daemon,
// a simulated stream in the simulator), holds one stream, feeds the Sender machine with the
// standby's messages and the time, sends what it returns, redials after a broken link, and
// releases log entries no longer needed. Thin: the decisions are the Sender's.
import {
  type Clock,
  type Link,
  type PrimaryMessage,
  type ReplicationLog,
  type StandbyMessage,
  type TimerHandle,
  type Timers,
  traceSnapshotChunk,
} from "@vgpu-ha/common";
import type { Sender, SenderEvent } from "./core/sender.js";
import type { SnapshotOutlet } from "./snapshot-outlet.js";

export type PeerLink = Link<PrimaryMessage, StandbyMessage>;

export interface PeerLinkDeps {
  readonly sender: Sender;
  readonly log: ReplicationLog;
  readonly clock: Clock;
  readonly timers: Timers;
  /** Opens a replication stream to the peer. */
  readonly dial: () => PeerLink;
  readonly reconnectMs: number;
  readonly retainBytes: number;
  /** After every step: acks may release guest replies, lag may lift back-pressure. */
  readonly onProgress: () => void;
  readonly onEvent: (event: SenderEvent) => void;
  /**
   * Where snapshot chunks after the first go when the standby pulls them (absent: everything
   * on the stream, as the simulators run it).
   */
  readonly outlet?: SnapshotOutlet;
}

export class PeerLinkShell {
  private readonly deps: PeerLinkDeps;
  private link: PeerLink | undefined;
  /** The stream reported a full buffer: wait for its drain. */
  private blocked = false;
  private stopped = false;
  private ticker: TimerHandle | undefined;
  private redial: TimerHandle | undefined;

  constructor(deps: PeerLinkDeps) {
    this.deps = deps;
  }

  get connected(): boolean {
    return this.link !== undefined;
  }

  start(): void {
    const tickMs = Math.max(5, Math.min(50, this.deps.sender.options.heartbeatMs / 2));
    this.ticker = this.deps.timers.setInterval(tickMs, () => this.pump());
    this.dial();
  }

  stop(): void {
    this.stopped = true;
    this.deps.timers.clear(this.ticker);
    this.deps.timers.clear(this.redial);
    this.link?.close("primary stopping");
    this.deps.outlet?.end();
  }

  private dial(): void {
    if (this.stopped) return;
    const { sender, clock } = this.deps;
    const link = this.deps.dial();
    link.onMessage((message) => {
      if (message.kind === "ack" && message.snapshotChunk > 0) {
        traceSnapshotChunk("p.ackSeen", message.snapshotChunk - 1);
      }
      sender.step(message, clock.monotonicMs());
      this.afterStep();
    });
    link.onDrain(() => {
      this.blocked = false;
      this.pump();
    });
    link.onClose(() => {
      if (this.link === link) this.link = undefined;
      sender.disconnected();
      this.afterStep();
      if (!this.stopped) {
        this.redial = this.deps.timers.setTimeout(this.deps.reconnectMs, () => this.dial());
      }
    });
    this.link = link;
    this.blocked = false;
    sender.connected(clock.monotonicMs());
    this.pump();
  }

  private afterStep(): void {
    for (const event of this.deps.sender.takeEvents()) this.deps.onEvent(event);
    this.deps.onProgress();
    this.pump();
  }

  /** Sends what the Sender wants to send now even if the stream reported a full buffer. */
  pumpNow(): void {
    this.blocked = false;
    this.pump();
  }

  /**
   * Sends what the Sender wants to send now, unless the stream's buffer is full. A pump asked
   * for while one runs (device progress reported from inside the sender's poll, e.g. while a
   * snapshot chunk reads pages) runs after it, never inside it: messages keep their order.
   */
  pump(): void {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.pumpAgain = false;
        this.pumpOnce();
      } while (this.pumpAgain);
    } finally {
      this.pumping = false;
    }
  }

  private pumping = false;
  private pumpAgain = false;

  private pumpOnce(): void {
    const { sender, log, clock } = this.deps;
    log.release(sender.releasableSeq, this.deps.retainBytes);
    if (this.link === undefined || this.blocked) return;
    const outlet = this.deps.outlet;
    for (const m of sender.poll(clock.monotonicMs())) {
      // Pages go to the standby's pull; chunk 0 (the metadata) here, which starts that pull.
      if (m.kind === "snapshot") traceSnapshotChunk("p.produced", m.chunk.index);
      if (m.kind === "snapshot" && m.chunk.index > 0 && outlet?.active) outlet.send(m);
      else if (!this.link.send(m)) this.blocked = true;
      if (m.kind === "snapshot" && m.chunk.index === 0) traceSnapshotChunk("p.sent", 0);
    }
    outlet?.sweep();
    for (const event of sender.takeEvents()) this.deps.onEvent(event);
  }
}
