// The standby's side of the snapshot transport: while a snapshot is in progress (its chunk 0
// came on the replication stream) it pulls the rest from the primary (PullSnapshot), as the
// client of that stream, so it can give it a large HTTP/2 receive window. One pull at a time,
// for the snapshot in progress, from the chunk the receiver needs next; a pull that ends early
// (a broken connection, a refusal) is opened again on a later look, at most every
// PULL_RETRY_MS. What arrives is stepped like the stream's messages (StandbyLink.pulled), and
// the receiver's acks go back on the replication stream. The port is warmed at the first look
// (the primary's first message): its connection is up before a snapshot's chunk 0 arrives.
// While the standby holds no replica (a snapshot follows) the port connects ahead, and a
// chunk 0 starting a snapshot opens its pull before it is restored (beforeStep), so the
// pull's hello, the primary's answer and its first chunks overlap that restore.
import {
  type PagesPlacer,
  type PrimaryMessage,
  type StandbyMessage,
  traceSnapshotChunk,
} from "@vgpu-ha/common";
import type { Receiver } from "./core/receiver.js";
import type { LinkLogger } from "./ports.js";

/** Opening a pull: the daemon's is a gRPC server-streaming call to the primary. */
export interface SnapshotPullPort {
  /**
   * Opens a pull with `request` (the standby's hello): `deliver` gets each message, `done` is
   * called once when the pull ends (`reason`: why; "" when the primary ended it after the last
   * chunk). Returns what cancels it.
   */
  open(
    request: StandbyMessage,
    deliver: (message: PrimaryMessage) => void,
    done: (reason: string) => void,
    place?: PagesPlacer,
  ): () => void;
  /** Gets ready to open pulls soon (the daemon's connects to the primary); optional. */
  warm?(): void;
  /**
   * A pull is expected soon (this standby holds no replica: a snapshot follows): connect ahead,
   * so that the pull's hello can go at once (the daemon's pages socket); optional, and called
   * after every step while it holds: it keeps at most one connection waiting.
   */
  preconnect?(): void;
  /** Releases what the port holds (the daemon's connection); pulls are closed already. */
  close?(): void;
}

/** Pause before a pull of the same snapshot is opened again after one ended. */
export const PULL_RETRY_MS = 200;

export class SnapshotPuller {
  private readonly deps: {
    readonly port: SnapshotPullPort;
    readonly receiver: Receiver;
    readonly now: () => number;
    readonly deliver: (message: PrimaryMessage) => void;
    readonly logger: LinkLogger;
  };
  private current: Pull | undefined;
  private lastOpen = { snapshotId: 0, atMs: Number.NEGATIVE_INFINITY };
  /** The snapshot whose pull ending was logged (logged once per snapshot, not per retry). */
  private loggedEnd = 0;
  /** Pulls opened (for tests and status). */
  opened = 0;
  /** Page bytes pulled: read straight into the replica (in place), or into a receive buffer. */
  readonly pulledBytes = { inPlace: 0, copied: 0 };
  private warmed = false;

  constructor(deps: SnapshotPuller["deps"]) {
    this.deps = deps;
  }

  /** A look after each step: pulls the snapshot in progress, if not pulled already. */
  check(): void {
    if (!this.warmed) {
      this.warmed = true;
      this.deps.port.warm?.();
    }
    const receiver = this.deps.receiver;
    const request = receiver.pullRequest();
    const current = this.current;
    if (current?.early === true) {
      // Opened before its chunk 0 was stepped: kept if that chunk started its snapshot.
      current.early = false;
      if (request?.snapshotId !== current.snapshotId) this.close();
    }
    if (request === undefined) {
      if (this.current === undefined && receiver.state !== "replica") this.deps.port.preconnect?.();
      return;
    }
    if (this.current?.snapshotId === request.snapshotId) return;
    const now = this.deps.now();
    const last = this.lastOpen;
    if (last.snapshotId === request.snapshotId && now - last.atMs < PULL_RETRY_MS) return;
    this.open(request, false);
  }

  /**
   * A message about to be stepped: a chunk 0 that starts a new snapshot has its pull opened
   * now, before its metadata is restored (buffers allocated, the sessions' replies rebuilt):
   * on a connection made ahead (preconnect) the hello goes at once, and the primary's answer
   * and first chunks come while this thread restores. Nothing pulled is read before chunk 0
   * is stepped (it arrives in later events of this thread), so pages placed in the replica
   * find it restored. The check after the step keeps the pull, or closes it if chunk 0
   * started nothing.
   */
  beforeStep(message: PrimaryMessage): void {
    if (message.kind !== "snapshot") return;
    const request = this.deps.receiver.pullRequestBefore(message.epoch, message.chunk);
    if (request !== undefined && this.current?.snapshotId !== request.snapshotId) {
      this.open(request, true);
    }
  }

  private open(request: Extract<StandbyMessage, { kind: "hello" }>, early: boolean): void {
    const now = this.deps.now();
    this.close();
    this.lastOpen = { snapshotId: request.snapshotId, atMs: now };
    this.opened++;
    traceSnapshotChunk("s.pullOpen", request.snapshotChunk);
    const pull: Pull = { snapshotId: request.snapshotId, cancel: () => {}, ended: false, early };
    pull.cancel = this.deps.port.open(
      request,
      (m) => {
        if (pull.ended) return;
        if (m.kind === "snapshot") this.count(m.chunk.pages);
        this.deps.deliver(m);
      },
      (reason) => {
        pull.ended = true;
        if (this.current === pull) this.current = undefined;
        if (reason !== "" && this.loggedEnd !== pull.snapshotId) {
          this.loggedEnd = pull.snapshotId;
          this.deps.logger.warn({ snapshot: pull.snapshotId, reason }, "snapshot pull ended");
        }
      },
      // A port that reads pages in place asks the receiver where each run goes.
      (chunk, run) => (pull.ended ? undefined : this.deps.receiver.placePages(chunk, run)),
    );
    if (!pull.ended) this.current = pull;
  }

  private count(pages: readonly { readonly data: Uint8Array; readonly placed?: boolean }[]) {
    for (const p of pages) {
      if (p.placed === true) this.pulledBytes.inPlace += p.data.byteLength;
      else this.pulledBytes.copied += p.data.byteLength;
    }
  }

  /** Ends the pull in progress and releases the port (the role stops). */
  stop(): void {
    this.close();
    this.deps.port.close?.();
  }

  /** Ends the pull in progress. */
  close(): void {
    const c = this.current;
    this.current = undefined;
    if (c === undefined) return;
    c.ended = true;
    c.cancel();
  }
}

interface Pull {
  readonly snapshotId: number;
  cancel: () => void;
  ended: boolean;
  /** Opened before its chunk 0 was stepped, not yet confirmed by the check after it. */
  early: boolean;
}
