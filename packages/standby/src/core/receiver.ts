// The standby's receiving state machine: applies entries strictly in seq order (a duplicate
// is ignored, a gap is never applied: it asks the primary to resend), takes snapshots, detects
// divergence (then stops applying, is not eligible, and asks for a full resync), and produces
// cumulative acknowledgements. Pure: step(message) returns what to send.
import type {
  CheckpointResult,
  Entry,
  FaultedFrame,
  NodeVersion,
  PrimaryMessage,
  SnapshotChunk,
  StandbyMessage,
} from "@vgpu-ha/common/core";
import { ErrorCode } from "@vgpu-ha/common/core";
import type { Backend, BackendOptions } from "@vgpu-ha/gpu-model";
import { computeDigest, SnapshotSink } from "@vgpu-ha/gpu-model";
import { type ApplyResult, applyEntry } from "./applier.js";

export interface ReceiverOptions {
  readonly clusterId: string;
  readonly nodeId: string;
  /** What this node runs, announced in its hello (absent: this build's protocol, no version). */
  readonly version?: NodeVersion;
  readonly backendOptions: BackendOptions;
  /** Applies one entry; defaults to applyEntry (tests may wrap it). */
  readonly apply?: (backend: Backend, entry: Entry) => ApplyResult;
}

/** Faulted frames kept at most (a bound: a primary names a handful, once). */
const FAULTED_FRAMES_MAX = 64;

export type ReceiverState = "empty" | "snapshot" | "replica" | "diverged";

export interface ReceiverEvent {
  readonly kind:
    | "divergence"
    | "snapshotStarted"
    | "snapshotDone"
    | "staleEpoch"
    | "gap"
    | "handover"
    | "handoverRefused"
    | "deviceFault";
  readonly seq: number;
  readonly detail: string;
}

export class Receiver {
  readonly options: ReceiverOptions;
  backend: Backend | undefined;
  state: ReceiverState = "empty";
  appliedSeq = 0;
  epoch: number;
  private sink: SnapshotSink | undefined;
  /**
   * The newest snapshot started on this connection. A sender numbers its snapshots upwards,
   * so chunk 0 of this one or an older one is a stale or duplicated copy, never a new start.
   */
  private newestSnapshotId = 0;
  /** The last snapshot installed: acks name it, so a sender whose last ack was lost can finish. */
  private installed: { readonly snapshotId: number; readonly chunks: number } | undefined;
  private gapReportedAt = -1;
  private lastHeartbeatUs = 0;
  private checkpoints: CheckpointResult[] = [];
  divergences = 0;
  readonly events: ReceiverEvent[] = [];
  /** Entries applied since the last count read, by kind (for metrics). */
  appliedEntries = 0;
  /** Frames a failed primary device was running (its DeviceFault), newest last. */
  readonly faultedFrames: FaultedFrame[] = [];

  constructor(options: ReceiverOptions, epoch: number) {
    this.options = options;
    this.epoch = epoch;
  }

  /**
   * Holds the primary's sync grant (core/release.ts): it has every entry whose reply the
   * primary released. Cleared when the state stops being a replica, by a newer epoch, or by the
   * primary's revocation.
   */
  granted = false;
  /** A handover announced at this seq, with this replica's digest there. */
  private announcedHandover: { readonly lastSeq: number; readonly digest: string } | undefined;

  /** Eligible to take over: a complete replica that has not diverged and holds the grant. */
  get eligible(): boolean {
    return this.state === "replica" && this.granted;
  }

  get snapshotProgress(): { snapshotId: number; chunks: number } | undefined {
    return this.sink ? { snapshotId: this.sink.snapshotId, chunks: this.sink.received } : undefined;
  }

  /** What to say when a connection to a primary opens. */
  hello(): StandbyMessage {
    return {
      kind: "hello",
      epoch: this.epoch,
      clusterId: this.options.clusterId,
      nodeId: this.options.nodeId,
      empty: this.state !== "replica",
      lastAppliedSeq: this.appliedSeq,
      snapshotId: this.sink?.snapshotId ?? 0,
      snapshotChunk: this.sink?.received ?? 0,
      ...this.options.version,
    };
  }

  /** A connection broke. A snapshot in progress is kept: the hello offers to resume it. */
  disconnected(): void {
    this.gapReportedAt = -1;
    this.newestSnapshotId = this.sink?.snapshotId ?? 0;
  }

  step(message: PrimaryMessage): StandbyMessage[] {
    if (message.epoch < this.epoch) {
      this.events.push({
        kind: "staleEpoch",
        seq: this.appliedSeq,
        detail: `epoch ${message.epoch}`,
      });
      return [
        {
          kind: "error",
          epoch: this.epoch,
          code: ErrorCode.STALE_EPOCH,
          message: `epoch ${message.epoch} is older than ${this.epoch}`,
        },
      ];
    }
    // Another cluster's node is refused before anything of it (its epoch) is taken.
    if (message.kind === "hello" && message.clusterId !== this.options.clusterId) {
      return [
        {
          kind: "error",
          epoch: this.epoch,
          code: ErrorCode.UNAUTHENTICATED,
          message: `cluster ${message.clusterId} is not ${this.options.clusterId}`,
        },
      ];
    }
    if (message.epoch > this.epoch) {
      this.granted = false; // a new primary grants anew, on its own clock
      this.lastHeartbeatUs = 0;
    }
    this.epoch = message.epoch;
    switch (message.kind) {
      case "hello":
        return [this.hello()]; // the primary repeats its hello until it hears ours
      case "heartbeat":
        // An older heartbeat (a late copy) says nothing new: its grant may have been revoked
        // since. Only the newest decides, and acks echo the newest.
        if (message.sentUs < this.lastHeartbeatUs) return [this.ack()];
        this.lastHeartbeatUs = message.sentUs;
        this.granted = message.syncReplica && this.state === "replica";
        return [this.ack()];
      case "entries":
        return this.onEntries(message.entries);
      case "snapshot":
        return this.onChunk(message.chunk);
      case "handover":
        return this.onHandover(message.lastSeq, message.digest);
      case "deviceFault":
        return this.onDeviceFault(message.frames, message.reason);
    }
  }

  /**
   * The primary's device failed while these frames' device work ran: kept for the promotion,
   * where a frame this replica does not have yet is answered DEVICE_FAULT, never run again.
   * A frame it has applied keeps the reply it cached (its device ran the frame).
   */
  private onDeviceFault(frames: readonly FaultedFrame[], reason: string): StandbyMessage[] {
    for (const f of frames) {
      if (this.faultedFrames.length >= FAULTED_FRAMES_MAX) this.faultedFrames.shift();
      this.faultedFrames.push(f);
    }
    const named = frames.map((f) => `${f.sessionId}#${f.frame} (seq ${f.seq})`).join(", ");
    this.events.push({
      kind: "deviceFault",
      seq: this.appliedSeq,
      detail: `${reason}; in flight: ${named || "no guest frame"}`,
    });
    return [this.ack()];
  }

  /**
   * A planned switchover: take over only as an exact replica of everything the primary has
   * (same last seq, equal digest). A refusal is reported; a differing digest is divergence.
   */
  private onHandover(lastSeq: number, digest: string): StandbyMessage[] {
    if (digest === "") {
      // Announced: compute ours now, while the primary computes its own.
      const ready = this.state === "replica" && this.appliedSeq === lastSeq;
      this.announcedHandover = ready
        ? { lastSeq, digest: computeDigest(this.backend!).state }
        : undefined;
      return [this.ack()];
    }
    if (this.state !== "replica" || this.appliedSeq !== lastSeq) {
      const detail = `state ${this.state}, applied ${this.appliedSeq} of ${lastSeq}`;
      this.events.push({ kind: "handoverRefused", seq: this.appliedSeq, detail });
      return [this.ack()];
    }
    const announced = this.announcedHandover;
    this.announcedHandover = undefined;
    const mine =
      announced?.lastSeq === lastSeq ? announced.digest : computeDigest(this.backend!).state;
    if (mine !== digest) return this.diverge(lastSeq, `digest ${mine} differs at handover`);
    this.events.push({ kind: "handover", seq: lastSeq, detail: "digests equal" });
    this.granted = true; // an exact replica of everything: the handover is the grant
    return [{ ...this.ack(), handoverAccepted: true }];
  }

  /** Takes an existing state as the replica (a primary that handed over keeps its state). */
  adopt(backend: Backend, appliedSeq: number): void {
    if (this.backend !== backend) this.backend?.close(); // its device thread ends
    this.backend = backend;
    this.appliedSeq = appliedSeq;
    this.state = "replica";
    this.granted = false; // until the new primary grants it
  }

  private onEntries(entries: readonly Entry[]): StandbyMessage[] {
    if (this.state !== "replica") return [this.ack()];
    for (const entry of entries) {
      if (entry.seq <= this.appliedSeq) continue; // duplicate: already applied
      if (entry.seq !== this.appliedSeq + 1) {
        // A gap: never applied. Ask once per position.
        if (this.gapReportedAt === this.appliedSeq) return [this.ack()];
        this.gapReportedAt = this.appliedSeq;
        this.events.push({ kind: "gap", seq: this.appliedSeq, detail: `got ${entry.seq}` });
        return [
          this.ack(),
          {
            kind: "resync",
            epoch: this.epoch,
            reason: "gap",
            fromSeq: this.appliedSeq + 1,
            detail: `got ${entry.seq}`,
          },
        ];
      }
      const result = (this.options.apply ?? applyEntry)(this.backend!, entry);
      if (!result.ok) return this.diverge(entry.seq, result.divergence);
      if (result.checkpoint) {
        this.checkpoints.push({ ...result.checkpoint, seq: entry.seq });
        if (!result.checkpoint.equal) {
          return this.diverge(
            entry.seq,
            `digest ${result.checkpoint.digest} differs at checkpoint`,
          );
        }
      }
      this.appliedSeq = entry.seq;
      this.appliedEntries++;
    }
    return [this.ack()];
  }

  private diverge(seq: number, detail: string): StandbyMessage[] {
    this.state = "diverged";
    this.granted = false;
    this.announcedHandover = undefined;
    this.divergences++;
    this.events.push({ kind: "divergence", seq, detail });
    const ack = this.ack();
    return [ack, { kind: "resync", epoch: this.epoch, reason: "diverged", fromSeq: 0, detail }];
  }

  private onChunk(chunk: SnapshotChunk): StandbyMessage[] {
    if (chunk.index === 0 && chunk.snapshotId > this.newestSnapshotId) {
      this.newestSnapshotId = chunk.snapshotId;
      this.sink?.close();
      this.sink = new SnapshotSink(this.options.backendOptions, chunk);
      this.state = "snapshot";
      this.granted = false;
      this.announcedHandover = undefined;
      this.events.push({
        kind: "snapshotStarted",
        seq: chunk.atSeq,
        detail: `snapshot ${chunk.snapshotId}`,
      });
    }
    const sink = this.sink;
    if (
      sink === undefined ||
      chunk.snapshotId !== sink.snapshotId ||
      chunk.index !== sink.received
    ) {
      return [this.ack()]; // stale, duplicate or out of order: the ack says where we are
    }
    const failure = sink.accept(chunk);
    if (failure) {
      sink.close();
      this.sink = undefined;
      this.state = "empty";
      return [
        this.ack(),
        {
          kind: "resync",
          epoch: this.epoch,
          reason: "diverged",
          fromSeq: 0,
          detail: failure.message,
        },
      ];
    }
    if (sink.done) {
      this.backend?.close(); // the replaced replica's device thread ends
      this.backend = sink.result();
      this.appliedSeq = sink.atSeq;
      this.state = "replica";
      this.gapReportedAt = -1;
      this.events.push({
        kind: "snapshotDone",
        seq: sink.atSeq,
        detail: `snapshot ${sink.snapshotId}`,
      });
      this.installed = { snapshotId: sink.snapshotId, chunks: sink.received };
      this.sink = undefined;
      return [this.ack()];
    }
    return [this.ack()];
  }

  ack(): Extract<StandbyMessage, { kind: "ack" }> {
    const checkpoints = this.checkpoints;
    this.checkpoints = [];
    const sink = this.sink;
    const snapshot = sink ? { snapshotId: sink.snapshotId, chunks: sink.received } : this.installed;
    return {
      kind: "ack",
      epoch: this.epoch,
      appliedSeq: this.state === "replica" || this.state === "diverged" ? this.appliedSeq : 0,
      snapshotId: snapshot?.snapshotId ?? 0,
      snapshotChunk: snapshot?.chunks ?? 0,
      heartbeatSentUs: this.lastHeartbeatUs,
      checkpoints,
    };
  }

  /** Drains the events recorded since the last call (for logs and metrics). */
  takeEvents(): ReceiverEvent[] {
    return this.events.splice(0);
  }
}
