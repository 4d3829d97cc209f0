// The standby's replication shell: serves vgpu.v1.Replication, feeds the Receiver machine with
// the primary's messages and writes back what it returns. One primary stream at a time: a new
// stream replaces the old one (the newer connection is the live one).
import * as grpc from "@grpc/grpc-js";
import {
  addService,
  decodePrimaryMessage,
  encodeStandbyMessage,
  grpcLink,
  type Link,
  type Logger,
  type PrimaryMessage,
  type StandbyMessage,
  wire,
} from "@vgpu-ha/common";
import type { Receiver } from "./core/receiver.js";

export interface ReplicationServerDeps {
  readonly listen: string;
  readonly receiver: Receiver;
  readonly logger: Logger;
  readonly maxMessageBytes: number;
  /** After each message from the primary (events, metrics). */
  readonly onStep: (message: PrimaryMessage) => void;
}

export class ReplicationServer {
  private readonly deps: ReplicationServerDeps;
  private readonly server: grpc.Server;
  private link: Link<StandbyMessage, PrimaryMessage> | undefined;
  port = 0;
  /** Monotonic ms of the last message from a primary. */
  lastMessageMs: number | undefined;

  constructor(deps: ReplicationServerDeps) {
    this.deps = deps;
    this.server = new grpc.Server({
      "grpc.max_receive_message_length": deps.maxMessageBytes,
      "grpc.max_send_message_length": deps.maxMessageBytes,
    });
    addService(this.server, wire.Replication, { stream: (call) => this.accept(call) });
  }

  get connected(): boolean {
    return this.link !== undefined;
  }

  async start(): Promise<number> {
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(this.deps.listen, grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    return this.port;
  }

  async stop(): Promise<void> {
    this.link?.close("standby stopping");
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, 2000);
      this.server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
  }

  private accept(call: grpc.ServerDuplexStream<wire.PrimaryMessage, wire.StandbyMessage>): void {
    const { receiver, logger } = this.deps;
    if (this.link) {
      logger.warn("a new primary stream replaces the current one");
      this.link.close("replaced by a newer stream");
    }
    const link = grpcLink<StandbyMessage, PrimaryMessage, wire.StandbyMessage, wire.PrimaryMessage>(
      call,
      encodeStandbyMessage,
      decodePrimaryMessage,
    );
    this.link = link;
    logger.info({ applied: receiver.appliedSeq, state: receiver.state }, "primary connected");
    link.onMessage((message) => {
      this.lastMessageMs = performance.now();
      for (const out of receiver.step(message)) link.send(out);
      this.deps.onStep(message);
    });
    link.onClose((reason) => {
      if (this.link === link) {
        this.link = undefined;
        receiver.disconnected();
        logger.warn({ reason, applied: receiver.appliedSeq }, "primary disconnected");
      }
    });
    link.send(receiver.hello());
  }
}
