// The standby's end of the replication stream: feeds the Receiver machine with the primary's
// messages and writes back what it returns. One primary stream at a time: a newer stream
// replaces the current one. The gRPC server belongs to the node; it hands streams here.
import type * as grpc from "@grpc/grpc-js";
import {
  announcedVersion,
  ErrorCode,
  encodeStandbyMessage,
  grpcLink,
  helloRefusal,
  type IdentityRefusal,
  type Link,
  NO_HELLO,
  type NodeVersion,
  type PeerIdentityRule,
  type PrimaryMessage,
  primaryDecoder,
  type StandbyMessage,
  traceSnapshotChunk,
  type wire,
} from "@vgpu-ha/common";
import type { Receiver } from "./core/receiver.js";
import type { LinkLogger } from "./ports.js";

/** Why a stream was refused: not our peer (peer-identity.ts), or our peer at an older epoch. */
export type StreamRefusal =
  | IdentityRefusal
  | { readonly reason: "stale_epoch"; readonly code: ErrorCode; readonly message: string };

export type ReplicationCall = grpc.ServerDuplexStream<wire.PrimaryMessage, wire.StandbyMessage>;

export class StandbyLink {
  private readonly receiver: Receiver;
  private readonly logger: LinkLogger;
  private readonly onStep: (message: PrimaryMessage) => void;
  private readonly now: () => number;
  private readonly identity: PeerIdentityRule;
  private readonly onRefused: ((refusal: StreamRefusal, remote: string) => void) | undefined;
  private readonly muted: () => boolean;
  private readonly heardWhileMuted: (() => void) | undefined;
  private readonly beforeStep: ((message: PrimaryMessage) => void) | undefined;
  private link: Link<StandbyMessage, PrimaryMessage> | undefined;
  /** Streams refused before they became the live one (for tests and status). */
  refusedStreams = 0;
  /**
   * Streams accepted and not yet live (no hello yet): close() must end them too, or one would
   * become live on a stopped role — whose replica may already serve as a new primary's state.
   */
  private readonly pending = new Set<Link<StandbyMessage, PrimaryMessage>>();
  private closed = false;
  /** A message is being stepped through the receiver (device progress may report meanwhile). */
  private stepping = false;
  /** Monotonic ms of the last message from a primary (undefined: none since start). */
  lastMessageMs: number | undefined;
  /** What the peer runs, from its last hello naming it (refused for its version or not). */
  peerVersion: NodeVersion | undefined;

  constructor(deps: {
    receiver: Receiver;
    logger: LinkLogger;
    onStep: (message: PrimaryMessage) => void;
    now: () => number;
    /** Who may be this standby's primary: its configured peer (peer.name) of its cluster. */
    identity: PeerIdentityRule;
    /** A stream refused before it became the live one: count it, log it (rate-limited). */
    onRefused?: (refusal: StreamRefusal, remote: string) => void;
    /**
     * True while a takeover waits for the device to apply the received backlog: the old
     * primary is neither heard nor answered (an ack would renew the lease it must lose).
     */
    muted?: () => boolean;
    /**
     * The live stream's primary spoke while muted (it is alive: the driver may call the takeover
     * off, which unmutes the stream, and the message is then taken as usual).
     */
    heardWhileMuted?: () => void;
    /** A message of the live stream is about to be stepped (SnapshotPuller.beforeStep). */
    beforeStep?: (message: PrimaryMessage) => void;
  }) {
    this.receiver = deps.receiver;
    this.logger = deps.logger;
    this.onStep = deps.onStep;
    this.now = deps.now;
    this.identity = deps.identity;
    this.onRefused = deps.onRefused;
    this.muted = deps.muted ?? (() => false);
    this.heardWhileMuted = deps.heardWhileMuted;
    this.beforeStep = deps.beforeStep;
  }

  get connected(): boolean {
    return this.link !== undefined;
  }

  /**
   * A new stream becomes the live one only once it says a valid hello (this cluster, an epoch
   * not older than ours, a node id other than ours — and peer.name's under tls); until then
   * the current primary's stream is untouched.
   */
  accept(call: ReplicationCall): void {
    const link = grpcLink<StandbyMessage, PrimaryMessage, wire.StandbyMessage, wire.PrimaryMessage>(
      call,
      encodeStandbyMessage,
      primaryDecoder(),
    );
    this.acceptLink(link, call.getPeer());
  }

  /** accept() over any transport (tests use an in-memory link). */
  acceptLink(link: Link<StandbyMessage, PrimaryMessage>, remote = "in-memory"): void {
    const { receiver, logger } = this;
    if (this.closed) {
      link.close("standby stopped");
      return;
    }
    this.pending.add(link);
    link.onMessage((message) => {
      if (this.muted()) {
        if (this.link === link && message.epoch >= receiver.epoch) this.heardWhileMuted?.();
        if (this.muted()) return;
      }
      if (this.link !== link) {
        this.pending.delete(link);
        const why = this.refusal(message);
        if (why !== null) {
          // Say why without letting the stranger's message change our state.
          this.refusedStreams++;
          this.onRefused?.(why, remote);
          if (why.reason === "stale_epoch") {
            // Our own peer, of an older epoch: our hello tells it who we are and our epoch, so
            // it steps down (it believes no epoch from an end that has not named itself).
            link.send(receiver.hello());
          }
          // Our peer of another protocol version or kernel contract: our hello (without our
          // epoch: nothing is believed across versions) says what we run, so it refuses us
          // too, naming both.
          if ("versions" in why && why.versions) link.send({ ...receiver.hello(), epoch: 0 });
          // A stranger learns nothing of us, not even our epoch.
          const epoch = why.reason === "stale_epoch" ? receiver.epoch : 0;
          link.send({ kind: "error", epoch, code: why.code, message: why.message });
          link.close("no valid hello");
          return;
        }
        if (this.link) {
          logger.warn({}, "a new primary stream replaces the current one");
          this.link.close("replaced by a newer stream");
        }
        this.link = link;
        logger.info({ seq: receiver.appliedSeq, state: receiver.state }, "primary connected");
        // Said once the primary's last seq is known (a replica beyond it is another history,
        // dropped: foreignReplica) — at the stream's first hello only: a late copy of it names
        // an older last seq. The receiver answers the same hello with another copy.
        if (message.kind === "hello") link.send(receiver.answerHello(message));
      }
      if (message.epoch >= receiver.epoch) this.lastMessageMs = this.now();
      // Chunk 0 (the metadata) comes on the stream: its arrival and restore are traced too.
      const chunk = message.kind === "snapshot" ? message.chunk.index : -1;
      if (chunk >= 0) traceSnapshotChunk("s.received", chunk);
      this.beforeStep?.(message);
      this.stepping = true;
      let replies: StandbyMessage[];
      try {
        replies = receiver.step(message);
      } finally {
        this.stepping = false;
      }
      if (chunk >= 0) traceSnapshotChunk("s.stepped", chunk);
      for (const out of replies) link.send(out);
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

  /**
   * Why the first message of a stream does not make it the live one (null: it does). Who it is
   * comes first: a stranger's epoch is never looked at (peer-identity.ts).
   */
  private refusal(message: PrimaryMessage): StreamRefusal | null {
    const receiver = this.receiver;
    if (message.kind !== "hello") return NO_HELLO;
    const who = helloRefusal(this.identity, message);
    if (who === null || who.versions) this.peerVersion = announcedVersion(message);
    if (who !== null) return who;
    if (message.epoch < receiver.epoch) {
      return {
        reason: "stale_epoch",
        code: ErrorCode.STALE_EPOCH,
        message: `epoch ${message.epoch} is older than ${receiver.epoch}`,
      };
    }
    return null;
  }

  /**
   * A message of a snapshot pull (snapshot-puller.ts): stepped like the stream's; the
   * receiver's answer (its ack) goes back on the live stream. Only chunks are taken there.
   */
  pulled(message: PrimaryMessage): void {
    if (this.closed || this.muted() || message.kind !== "snapshot") return;
    traceSnapshotChunk("s.received", message.chunk.index);
    if (message.epoch >= this.receiver.epoch) this.lastMessageMs = this.now();
    this.stepping = true;
    let replies: StandbyMessage[];
    try {
      replies = this.receiver.step(message);
    } finally {
      this.stepping = false;
    }
    const link = this.link;
    traceSnapshotChunk("s.stepped", message.chunk.index);
    if (link !== undefined) for (const out of replies) link.send(out);
    traceSnapshotChunk("s.ackSent", message.chunk.index);
    this.onStep(message);
  }

  /**
   * Sends what the receiver has to say outside an answer (Receiver.poll: acks of device
   * progress, results the device produced); with no live stream it waits for the next.
   */
  flush(): void {
    const link = this.link;
    // Inside a step, what the device reported goes out with the step's own answer.
    if (link === undefined || this.closed || this.stepping || this.muted()) return;
    for (const out of this.receiver.poll()) link.send(out);
  }

  /** Ends the live stream and any not yet live; later streams are refused. */
  close(reason: string): void {
    this.closed = true;
    for (const pending of [...this.pending]) pending.close(reason);
    this.link?.close(reason);
    this.link = undefined;
  }
}
