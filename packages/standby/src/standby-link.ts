// The standby's end of the replication stream: feeds the Receiver machine with the primary's
// messages and writes back what it returns. One primary stream at a time: a newer stream
// replaces the current one. The gRPC server belongs to the node; it hands streams here.
import type * as grpc from "@grpc/grpc-js";
import {
  decodePrimaryMessage,
  ErrorCode,
  encodeStandbyMessage,
  grpcLink,
  type Link,
  type Logger,
  type PrimaryMessage,
  type StandbyMessage,
  type wire,
} from "@vgpu-ha/common";
import type { Receiver } from "./core/receiver.js";

export type ReplicationCall = grpc.ServerDuplexStream<wire.PrimaryMessage, wire.StandbyMessage>;

export class StandbyLink {
  private readonly receiver: Receiver;
  private readonly logger: Logger;
  private readonly onStep: (message: PrimaryMessage) => void;
  private readonly now: () => number;
  private link: Link<StandbyMessage, PrimaryMessage> | undefined;
  /**
   * Streams accepted and not yet live (no hello yet): close() must end them too, or one would
   * become live on a stopped role — whose replica may already serve as a new primary's state.
   */
  private readonly pending = new Set<Link<StandbyMessage, PrimaryMessage>>();
  private closed = false;
  /** Monotonic ms of the last message from a primary (undefined: none since start). */
  lastMessageMs: number | undefined;

  constructor(deps: {
    receiver: Receiver;
    logger: Logger;
    onStep: (message: PrimaryMessage) => void;
    now: () => number;
  }) {
    this.receiver = deps.receiver;
    this.logger = deps.logger;
    this.onStep = deps.onStep;
    this.now = deps.now;
  }

  get connected(): boolean {
    return this.link !== undefined;
  }

  /**
   * A new stream becomes the live one only once it says a valid hello (this cluster, an epoch
   * not older than ours); until then the current primary's stream is untouched.
   */
  accept(call: ReplicationCall): void {
    const { receiver, logger } = this;
    const link = grpcLink<StandbyMessage, PrimaryMessage, wire.StandbyMessage, wire.PrimaryMessage>(
      call,
      encodeStandbyMessage,
      decodePrimaryMessage,
    );
    if (this.closed) {
      link.close("standby stopped");
      return;
    }
    this.pending.add(link);
    link.onMessage((message) => {
      if (this.link !== link) {
        this.pending.delete(link);
        const valid =
          message.kind === "hello" &&
          message.clusterId === receiver.options.clusterId &&
          message.epoch >= receiver.epoch;
        if (!valid) {
          // Say why without letting the stranger's message change our state.
          link.send({
            kind: "error",
            epoch: receiver.epoch,
            code:
              message.kind !== "hello" || message.epoch < receiver.epoch
                ? ErrorCode.STALE_EPOCH
                : ErrorCode.UNAUTHENTICATED,
            message: "a primary stream must start with a valid hello of this cluster",
          });
          link.close("no valid hello");
          return;
        }
        if (this.link) {
          logger.warn("a new primary stream replaces the current one");
          this.link.close("replaced by a newer stream");
        }
        this.link = link;
        logger.info({ seq: receiver.appliedSeq, state: receiver.state }, "primary connected");
        link.send(receiver.hello());
      }
      if (message.epoch >= receiver.epoch) this.lastMessageMs = this.now();
      for (const out of receiver.step(message)) link.send(out);
      this.onStep(message);
    });
    link.onClose((reason) => {
      this.pending.delete(link);
      if (this.link === link) {
        this.link = undefined;
        receiver.disconnected();
        logger.warn({ reason, seq: receiver.appliedSeq }, "primary disconnected");
      }
    });
  }

  /** Ends the live stream and any not yet live; later streams are refused. */
  close(reason: string): void {
    this.closed = true;
    for (const pending of [...this.pending]) pending.close(reason);
    this.link?.close(reason);
    this.link = undefined;
  }
}
