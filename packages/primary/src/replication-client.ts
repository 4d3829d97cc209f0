// The primary's replication shell: dials the standby, holds one stream, feeds the Sender
// machine with the standby's messages and the time, sends what it returns, redials after a
// broken link, and releases log entries no longer needed. Thin: the decisions are the
// Sender's.
import * as grpc from "@grpc/grpc-js";
import {
  type Clock,
  createClient,
  decodeStandbyMessage,
  encodePrimaryMessage,
  entryBytes,
  grpcLink,
  type Link,
  type Logger,
  type NodeMetrics,
  type PeerChannel,
  type PrimaryMessage,
  type ReplicationLog,
  type StandbyMessage,
  wire,
} from "@vgpu-ha/common";
import type { Sender, SenderEvent } from "./core/sender.js";

type Counter = { inc(value?: number): void };

export interface ReplicationClientDeps {
  readonly address: string;
  /** How to dial (mutual TLS naming the peer, or plaintext; common/tls/peer-credentials.ts). */
  readonly channel?: PeerChannel;
  readonly sender: Sender;
  readonly log: ReplicationLog;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: NodeMetrics;
  readonly reconnectMs: number;
  readonly retainBytes: number;
  readonly maxMessageBytes: number;
  /** After every step: acks may release guest replies, lag may lift back-pressure. */
  readonly onProgress: () => void;
  readonly onEvent?: (event: SenderEvent) => void;
}

export class ReplicationClient {
  private readonly deps: ReplicationClientDeps;
  private client: grpc.Client | undefined;
  private link: Link<PrimaryMessage, StandbyMessage> | undefined;
  private blocked = false;
  private stopped = false;
  private ticker: NodeJS.Timeout | undefined;
  private redial: NodeJS.Timeout | undefined;
  connectedSinceMs: number | undefined;
  /** Why the last dial failed before the link came up, logged once until it changes. */
  private lastDialFailure: string | undefined;

  constructor(deps: ReplicationClientDeps) {
    this.deps = deps;
  }

  get connected(): boolean {
    return this.link !== undefined;
  }

  start(): void {
    const tickMs = Math.max(5, Math.min(50, this.deps.sender.options.heartbeatMs / 2));
    this.ticker = setInterval(() => this.pump(), tickMs);
    this.dial();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.ticker);
    clearTimeout(this.redial);
    this.link?.close("primary stopping");
    this.client?.close();
  }

  private dial(): void {
    if (this.stopped) return;
    const { address, maxMessageBytes } = this.deps;
    const channel = this.deps.channel;
    const client = createClient(
      wire.Replication,
      address,
      channel?.credentials ?? grpc.credentials.createInsecure(),
      {
        ...channel?.options,
        "grpc.max_receive_message_length": maxMessageBytes,
        "grpc.max_send_message_length": maxMessageBytes,
        "grpc.keepalive_time_ms": 10_000,
      },
    );
    this.client = client;
    const stream = client.stream();
    const link = grpcLink<PrimaryMessage, StandbyMessage, wire.PrimaryMessage, wire.StandbyMessage>(
      stream,
      encodePrimaryMessage,
      decodeStandbyMessage,
    );
    let opened = false;
    link.onMessage((message) => {
      this.deps.sender.step(message, this.deps.clock.monotonicMs());
      // Up once the peer's hello is taken: a peer refused at its hello (not ours, another
      // protocol version) is a failed dial, said once, not a link up and down per retry.
      if (!opened && this.deps.sender.state !== "hello") {
        opened = true;
        this.lastDialFailure = undefined;
        this.connectedSinceMs = this.deps.clock.monotonicMs();
        this.deps.logger.info({ peer: address }, "replication link up");
      }
      this.afterStep();
    });
    link.onDrain(() => {
      this.blocked = false;
      this.pump();
    });
    link.onClose((reason) => {
      if (this.link === link) this.link = undefined;
      client.close();
      this.deps.sender.disconnected();
      this.connectedSinceMs = undefined;
      if (opened) this.deps.logger.warn({ peer: address, reason }, "replication link down");
      else if (withoutTimes(reason) !== this.lastDialFailure) {
        // A peer that refuses us (TLS: wrong CA, wrong name) or is away: said once, not per retry.
        this.lastDialFailure = withoutTimes(reason);
        this.deps.logger.warn({ peer: address, reason }, "replication: cannot reach the standby");
      }
      this.afterStep();
      if (!this.stopped) this.redial = setTimeout(() => this.dial(), this.deps.reconnectMs);
    });
    this.link = link;
    this.blocked = false;
    this.deps.sender.connected(this.deps.clock.monotonicMs());
    this.pump();
  }

  private afterStep(): void {
    for (const event of this.deps.sender.takeEvents()) this.deps.onEvent?.(event);
    this.deps.onProgress();
    this.pump();
  }

  private readonly byKind = new Map<string, { entries: Counter; bytes: Counter }>();

  private count(body: Parameters<typeof entryBytes>[0]): void {
    let c = this.byKind.get(body.kind);
    if (c === undefined) {
      const m = this.deps.metrics;
      c = {
        entries: m.replicatedEntries.labels({ kind: body.kind }),
        bytes: m.replicatedBytes.labels({ kind: body.kind }),
      };
      this.byKind.set(body.kind, c);
    }
    c.entries.inc();
    c.bytes.inc(entryBytes(body));
  }

  /** Sends what the Sender wants to send now even if the stream reported a full buffer. */
  pumpNow(): void {
    this.blocked = false;
    this.pump();
  }

  /** Sends what the Sender wants to send now, unless the stream's buffer is full. */
  pump(): void {
    const { sender, log, clock } = this.deps;
    log.release(sender.releasableSeq, this.deps.retainBytes);
    if (this.link === undefined || this.blocked) return;
    const messages = sender.poll(clock.monotonicMs());
    for (const m of messages) {
      if (m.kind === "entries") {
        for (const e of m.entries) this.count(e.body);
      }
      if (!this.link.send(m)) this.blocked = true;
    }
    for (const event of sender.takeEvents()) this.deps.onEvent?.(event);
  }
}

/** grpc-js puts a timestamp in connection errors; without it, repeats compare equal. */
function withoutTimes(reason: string): string {
  return reason.replace(/\s*\(\d{4}-\d\d-\d\dT[^)]*\)/g, "");
}
