// The primary's end of a standby's snapshot pull (PullSnapshot): one pull stream at a time,
// for the snapshot the Sender is sending now. The PeerLinkShell hands it every chunk after the
// first (chunk 0, the metadata, goes on the replication stream and starts the standby's pull);
// chunks produced while no pull is open are held by the Sender (its window) and written when
// the pull opens. The stream is reliable and in order: a chunk is written once per pull (the
// Sender's resends after retransmitMs are not repeated on it); a broken pull is reopened by the
// standby from the chunk it reached.
import {
  type ErrorCode,
  type PrimaryMessage,
  type SnapshotChunk,
  type StandbyMessage,
  traceSnapshotChunk,
} from "@vgpu-ha/common";
import type { Sender } from "./core/sender.js";
import { decidePull, type PullDecision } from "./core/snapshot-pull.js";

/** A pull stream as the outlet writes it (a grpc-js server stream in the daemon). */
export interface PullStream {
  /** False when the stream's buffer is full (the Sender's window bounds what is written). */
  write(message: PrimaryMessage): boolean;
  /** Ends the stream after what was written. */
  end(): void;
  /** Ends the stream with an error: the refusal's code. */
  fail(code: ErrorCode, message: string): void;
  onClose(handler: () => void): void;
}

export class SnapshotOutlet {
  private readonly sender: Sender;
  private pull: { stream: PullStream; snapshotId: number; next: number } | undefined;

  constructor(sender: Sender) {
    this.sender = sender;
  }

  /** Whether chunk messages after the first go to a pull (the standby said it pulls). */
  get active(): boolean {
    return this.sender.peerPullsSnapshots;
  }

  /** A standby opens a pull: served, or refused with the reason (returned for the log). */
  open(stream: PullStream, request: StandbyMessage): PullDecision {
    const decision = decidePull(this.sender, request);
    if (decision.kind === "refuse") {
      stream.fail(decision.code, decision.message);
      return decision;
    }
    this.end(); // a newer pull replaces the one before (the standby reopened it)
    const pull = { stream, snapshotId: decision.snapshotId, next: 0 };
    this.pull = pull;
    stream.onClose(() => {
      if (this.pull === pull) this.pull = undefined;
    });
    for (const chunk of decision.chunks) this.write(chunk);
    return decision;
  }

  /** A snapshot message of the Sender's (index ≥ 1). Without a matching pull it waits (held). */
  send(message: Extract<PrimaryMessage, { kind: "snapshot" }>): void {
    if (this.pull?.snapshotId === message.chunk.snapshotId) this.write(message.chunk);
  }

  /** Ends a pull whose snapshot is no longer the one being sent (done, replaced, dropped). */
  sweep(): void {
    const p = this.pull;
    if (p !== undefined && this.sender.snapshotProgress?.snapshotId !== p.snapshotId) this.end();
  }

  /** Ends the pull (the role stops). */
  end(): void {
    const p = this.pull;
    this.pull = undefined;
    p?.stream.end();
  }

  private write(chunk: SnapshotChunk): void {
    const p = this.pull!;
    if (chunk.index < p.next) return; // written on this pull already
    p.next = chunk.index + 1;
    p.stream.write({ kind: "snapshot", epoch: this.sender.epoch, chunk });
    traceSnapshotChunk("p.written", chunk.index);
    if (chunk.last) this.end();
  }
}
