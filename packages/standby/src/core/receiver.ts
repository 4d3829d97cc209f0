// The standby's receiving state machine: applies entries strictly in seq order (a duplicate
// is ignored, a gap is never applied: it asks the primary to resend), takes snapshots, detects
// divergence (then stops applying, is not eligible, and asks for a full resync), and produces
// cumulative acknowledgements. Pure: step(message) returns what to send.
//
// The device runs beside it (gpu-model device/progress.ts): an entry is *received* once it is
// handed to the backend (its code checked at once, its device work queued, tagged with its seq)
// and *applied* once the device completed that work (appliedSeq = progress.doneSeq). Acks
// carry both. Results that need the device — a dmaRead's output digest, a checkpoint's state
// digest — are compared once both sides have theirs: the primary's come as late results, ours
// from the device (deviceResult, called back after the device). What such a later input has
// to say goes out through poll().
//
// Holding (a primary asks for it by sending its device's done seq on every entry batch:
// core/release.ts holdsStandbyDevice): a received entry waits here until the primary's device
// has done it, and only then is handed to the backend. A frame that hangs a device so never runs
// on both nodes at once: the primary's watchdog fires first, it names the frame (DeviceFault),
// and once it is gone (releaseHeld: its lease ran out, or a takeover) that frame is recorded
// as DEVICE_FAULT instead of running, and every other held entry goes to the device before the
// node serves. Receipt acks do not wait.
import type {
  CheckpointResult,
  Entry,
  FaultedFrame,
  LateResult,
  NodeVersion,
  PagesPlacement,
  PagesRunHead,
  PrimaryMessage,
  SnapshotChunk,
  StandbyMessage,
} from "@vgpu-ha/common/core";
import {
  deviceFaultRecord,
  ErrorCode,
  otherLineage,
  REPLICATION_PROTOCOL_VERSION,
} from "@vgpu-ha/common/core";
import type { Backend, BackendOptions } from "@vgpu-ha/gpu-model";
import { digestWhenDone, SnapshotSink, summarizeResult } from "@vgpu-ha/gpu-model";
import Denque from "denque";
import { type ApplyResult, applyEntry } from "./applier.js";
import { LateChecks, type LateOutcome } from "./late-checks.js";

export interface ReceiverOptions {
  readonly clusterId: string;
  readonly nodeId: string;
  /** What this node runs, announced in its hello (absent: this build's protocol, no version). */
  readonly version?: NodeVersion;
  readonly backendOptions: BackendOptions;
  /** Applies one entry; defaults to applyEntry (tests may wrap it). */
  readonly apply?: (backend: Backend, entry: Entry) => ApplyResult;
  /** This standby pulls snapshot pages on a stream of its own (its hello says so). */
  readonly pullsSnapshots?: boolean;
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
    | "deviceFault"
    | "faultedNotRun"
    | "foreignReplica";
  readonly seq: number;
  readonly detail: string;
}

export class Receiver {
  readonly options: ReceiverOptions;
  backend: Backend | undefined;
  state: ReceiverState = "empty";
  /** Every entry up to it is received: handed to the backend, or held (holdingDevice). */
  receivedSeq = 0;
  /** Every entry up to it is handed to the backend (its device runs them in order). */
  submittedSeq = 0;
  /** The primary asks us to hold device work until its device has done it (its last batch). */
  holdingDevice = false;
  /** The primary's device has done every entry's work up to this seq (its entry batches). */
  primaryDoneSeq = 0;
  /** Received entries not yet handed to the backend (holding), oldest first. */
  private readonly held = new Denque<Entry>();
  /** Faulted frames a takeover recorded as DEVICE_FAULT without running them. */
  faultedNotRun = 0;
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
  /** Results waiting for the other side's (ours after the device, or the primary's). */
  private readonly late = new LateChecks();
  /** Messages produced outside step() (device completions), for poll(). */
  private outbox: StandbyMessage[] = [];
  /** The applied seq the last ack carried: poll() acks again when the device moved on. */
  private ackedAppliedSeq = 0;
  /** Bumped whenever the backend is replaced: device callbacks of an older one are dropped. */
  private generation = 0;
  /** The lineage of the primary of this connection (its first hello; "": it said none). */
  private primaryLineage = "";
  /** The lineage of the snapshot in progress: its primary's when its chunk 0 came. */
  private sinkLineage = "";

  /**
   * Every entry up to it is applied: its device work is complete (the device's done seq). At
   * most receivedSeq.
   */
  get appliedSeq(): number {
    const b = this.backend;
    if (b === undefined) return this.receivedSeq;
    // Never backwards: work queued later under the same seq tag (a digest's hashing) is not
    // the entry's own work, which was complete once the device said so.
    const done = b.progress.doneSeq(this.submittedSeq);
    if (done > this.appliedHigh) this.appliedHigh = done;
    return this.appliedHigh;
  }

  /** The highest applied seq the device reported for this backend. */
  private appliedHigh = 0;

  /** Late comparisons still open (waiting for our device or the primary's result). */
  get openLateChecks(): number {
    return this.late.open;
  }

  /** Late comparisons dropped because the primary's result was lost with a broken link. */
  lateUnchecked = 0;

  /**
   * Entries received and not yet applied, held ones included (what a promotion waits for):
   * those handed to the device and not done yet, and those held for it. Entries that no state
   * will ever apply (dropped by a divergence) are not counted: a takeover waiting for them
   * would wait for ever.
   */
  get backlog(): number {
    return Math.max(0, this.submittedSeq - this.appliedSeq) + this.held.length;
  }

  /** Entries received and held until the primary's device has done them. */
  get heldEntries(): number {
    return this.held.length;
  }

  /** The held entries, oldest first (for simulators and tests: a copy). */
  get heldList(): readonly Entry[] {
    return this.held.toArray();
  }

  /** The seqs of the first and last held entries (undefined: none held). */
  get heldRange(): { readonly first: number; readonly last: number } | undefined {
    const first = this.held.peekFront();
    const last = this.held.peekBack();
    return first && last ? { first: first.seq, last: last.seq } : undefined;
  }
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
  /**
   * A handover announced at this seq, with this replica's digest there (undefined: not yet
   * taken; `started`: the device is hashing it — once every entry up to lastSeq is submitted).
   */
  private announcedHandover:
    | { readonly lastSeq: number; readonly digest: string | undefined; started?: boolean }
    | undefined;
  /** A handover whose digest came before ours was taken: answered once it is. */
  private pendingHandover: { readonly lastSeq: number; readonly digest: string } | undefined;

  /** Eligible to take over: a complete replica that has not diverged and holds the grant. */
  get eligible(): boolean {
    return this.state === "replica" && this.granted;
  }

  get snapshotProgress(): { snapshotId: number; chunks: number } | undefined {
    return this.sink ? { snapshotId: this.sink.snapshotId, chunks: this.sink.received } : undefined;
  }

  /**
   * What to say when a connection to a primary opens: it resends entries and late results
   * after our applied seq, so late comparisons up to it still missing the primary's part are
   * dropped (lost with the old connection).
   */
  hello(): StandbyMessage {
    this.lateUnchecked += this.late.dropUpTo(this.appliedSeq);
    return this.helloMessage();
  }

  /**
   * Our hello in answer to the first hello of a primary's stream: what we hold of its history
   * (copies the primary repeats are answered by step()).
   */
  answerHello(primary: Extract<PrimaryMessage, { kind: "hello" }>): StandbyMessage {
    this.primaryLineage = primary.lineage ?? "";
    this.refuseForeign(primary.lastSeq);
    return this.hello();
  }

  /**
   * The request of a snapshot pull (PullSnapshot): the hello naming the snapshot in progress
   * and the chunk it needs next; undefined when none is in progress.
   */
  pullRequest(): Extract<StandbyMessage, { kind: "hello" }> | undefined {
    return this.sink ? this.helloMessage() : undefined;
  }

  /**
   * The pull request that `chunk`, once stepped, would make (the hello naming its snapshot, from
   * chunk 1), while it is not stepped yet: it starts a new snapshot (a chunk 0 newer than any
   * seen on this connection, with metadata, at an epoch we answer). Undefined otherwise. Lets
   * the pull open before chunk 0's metadata is restored (SnapshotPuller.beforeStep).
   */
  pullRequestBefore(
    epoch: number,
    chunk: SnapshotChunk,
  ): Extract<StandbyMessage, { kind: "hello" }> | undefined {
    const starts =
      chunk.index === 0 &&
      chunk.meta !== undefined &&
      chunk.snapshotId > this.newestSnapshotId &&
      epoch >= this.epoch; // step() takes the message's epoch
    return starts ? { ...this.helloMessage("snapshot", chunk.snapshotId, 1), epoch } : undefined;
  }

  /**
   * Where a pulled chunk's run may be read straight into the replica being restored (the
   * snapshot sink's place()): only for the chunk it expects next.
   */
  placePages(
    chunk: { readonly snapshotId: number; readonly index: number },
    run: PagesRunHead,
  ): PagesPlacement | undefined {
    return this.sink?.place(chunk, run);
  }

  private helloMessage(
    state = this.state,
    snapshotId = this.sink?.snapshotId ?? 0,
    snapshotChunk = this.sink?.received ?? 0,
  ): Extract<StandbyMessage, { kind: "hello" }> {
    const lineage = state === "replica" ? (this.backend?.lineage ?? "") : "";
    return {
      kind: "hello",
      epoch: this.epoch,
      clusterId: this.options.clusterId,
      nodeId: this.options.nodeId,
      empty: state !== "replica",
      lastAppliedSeq: this.appliedSeq,
      snapshotId,
      snapshotChunk,
      ...(this.options.pullsSnapshots ? { pullsSnapshots: true } : {}),
      ...(lineage !== "" ? { lineage } : {}),
      // Without a version: this build's protocol (a hello without one is protocol 1).
      ...(this.options.version ?? { protocolVersion: REPLICATION_PROTOCOL_VERSION }),
    };
  }

  /** The node's epoch is `epoch`: nothing older is answered (a lower one changes nothing). */
  raiseEpoch(epoch: number): void {
    if (epoch > this.epoch) this.epoch = epoch;
  }

  /**
   * The standby role stops: a snapshot in progress is abandoned, and the device of the state it
   * was building ends (the replica itself is the caller's: a promotion hands it on).
   */
  abandonSnapshot(): void {
    this.sink?.close();
    this.sink = undefined;
  }

  /** A connection broke. A snapshot in progress is kept: the hello offers to resume it. */
  disconnected(): void {
    this.gapReportedAt = -1;
    this.newestSnapshotId = this.sink?.snapshotId ?? 0;
  }

  step(message: PrimaryMessage): StandbyMessage[] {
    // What the device produced meanwhile (possibly during this very step) goes out with it.
    return this.withOutbox(this.answer(message));
  }

  private answer(message: PrimaryMessage): StandbyMessage[] {
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
      this.primaryDoneSeq = 0; // and tells its own device's progress
    }
    this.epoch = message.epoch;
    switch (message.kind) {
      case "hello":
        // The primary repeats its hello until it hears ours. A copy says nothing new (a late
        // one names an older last seq: the first hello of a stream is answered by answerHello).
        return [this.hello()];
      case "heartbeat":
        // An older heartbeat (a late copy) says nothing new: its grant may have been revoked
        // since. Only the newest decides, and acks echo the newest.
        if (message.sentUs < this.lastHeartbeatUs) return [this.ack()];
        this.lastHeartbeatUs = message.sentUs;
        this.granted = message.syncReplica && this.state === "replica";
        return [this.ack()];
      case "entries": {
        const out = this.onEntries(message.entries, message.primaryDoneSeq);
        if (message.lateResults && this.state === "replica") {
          for (const r of message.lateResults) this.settle(this.late.theirs(r, this.submittedSeq));
        }
        return out;
      }
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
    // Everything up to lastSeq received; the digest, hashed after it on the device, is taken
    // once all of it is applied (the device's own hashing may hold its done seq meanwhile).
    const ready = this.state === "replica" && this.receivedSeq === lastSeq;
    if (digest === "") {
      // Announced: take ours now (the device hashes it), while the primary takes its own.
      this.announcedHandover = undefined;
      this.pendingHandover = undefined;
      if (ready) this.digestAt(lastSeq);
      return [this.ack()];
    }
    if (!ready) {
      const detail = `state ${this.state}, received ${this.receivedSeq} of ${lastSeq}`;
      this.events.push({ kind: "handoverRefused", seq: this.appliedSeq, detail });
      return [this.ack()];
    }
    const announced = this.announcedHandover;
    if (announced?.lastSeq === lastSeq && announced.digest !== undefined) {
      return this.handOver(lastSeq, digest, announced.digest);
    }
    // Ours is not there yet: the answer goes out once the device has hashed it (poll()).
    this.pendingHandover = { lastSeq, digest };
    if (announced?.lastSeq !== lastSeq) this.digestAt(lastSeq);
    return [this.ack()];
  }

  /**
   * Takes this replica's digest at `lastSeq` (all of it applied) through the device — once
   * every entry up to it is handed to the device (held ones wait for the primary's).
   */
  private digestAt(lastSeq: number): void {
    this.announcedHandover = { lastSeq, digest: undefined };
    this.startDigest();
  }

  private startDigest(): void {
    const a = this.announcedHandover;
    if (a === undefined || a.started === true || this.submittedSeq < a.lastSeq) return;
    a.started = true;
    const { lastSeq } = a;
    const generation = this.generation;
    digestWhenDone(this.backend!, (d) => {
      const announced = this.announcedHandover;
      if (generation !== this.generation || announced?.lastSeq !== lastSeq) return;
      this.announcedHandover = { lastSeq, digest: d.state };
      const pending = this.pendingHandover;
      if (pending?.lastSeq !== lastSeq || this.state !== "replica") return;
      this.outbox.push(...this.handOver(lastSeq, pending.digest, d.state));
    });
  }

  /** Both digests are in: take over as an exact replica, or diverge. */
  private handOver(lastSeq: number, theirs: string, mine: string): StandbyMessage[] {
    this.announcedHandover = undefined;
    this.pendingHandover = undefined;
    if (mine !== theirs) return this.diverge(lastSeq, `digest ${mine} differs at handover`);
    this.events.push({ kind: "handover", seq: lastSeq, detail: "digests equal" });
    this.granted = true; // an exact replica of everything: the handover is the grant
    return [{ ...this.ack(), handoverAccepted: true }];
  }

  /** Takes an existing state as the replica (a primary that handed over keeps its state). */
  adopt(backend: Backend, appliedSeq: number): void {
    this.replaceBackend(backend, appliedSeq);
    this.state = "replica";
    this.granted = false; // until the new primary grants it
  }

  /**
   * What to send that did not answer a message: results the device produced since (a
   * checkpoint's outcome, a divergence) and an ack once the applied seq moved. The driver calls
   * it after device progress.
   */
  poll(): StandbyMessage[] {
    const advanced = this.state === "replica" && this.appliedSeq > this.ackedAppliedSeq;
    if (this.outbox.length === 0 && !advanced && this.checkpoints.length === 0) return [];
    return this.withOutbox([this.ack()]);
  }

  /** Our own device produced the result of entry `seq` (late-checks.ts). */
  private deviceResult(generation: number, r: LateResult): void {
    if (generation !== this.generation || this.state !== "replica") return;
    this.settle(this.late.mine(r));
  }

  /** A late comparison completed: a checkpoint's outcome is acked, a mismatch is divergence. */
  private settle(outcome: LateOutcome | undefined): void {
    if (outcome === undefined) return;
    if (outcome.checkpoint) this.checkpoints.push(outcome.checkpoint);
    if (outcome.divergence !== undefined) {
      this.outbox.push(...this.diverge(outcome.seq, outcome.divergence));
    }
  }

  private withOutbox(out: StandbyMessage[]): StandbyMessage[] {
    if (this.outbox.length === 0) return out;
    const queued = this.outbox;
    this.outbox = [];
    // The outbox's messages first (a divergence's resync), then a fresh ack.
    return [...queued, ...out.filter((m) => m.kind !== "ack"), this.ack()];
  }

  /** The replica is gone: nothing held, nothing received (its device thread ends). */
  private dropBackend(): void {
    this.backend?.close();
    this.backend = undefined;
    this.receivedSeq = 0;
    this.submittedSeq = 0;
    this.held.clear();
    this.ackedAppliedSeq = 0;
    this.appliedHigh = 0;
    this.generation++;
    this.late.clear();
  }

  private replaceBackend(backend: Backend, seq: number): void {
    if (this.backend !== backend) this.backend?.close(); // the replaced replica's device thread ends
    this.backend = backend;
    this.receivedSeq = seq;
    this.submittedSeq = seq;
    this.held.clear();
    this.ackedAppliedSeq = 0;
    this.appliedHigh = 0;
    this.generation++;
    this.late.clear();
  }

  private onEntries(entries: readonly Entry[], primaryDoneSeq?: number): StandbyMessage[] {
    if (this.state !== "replica") return [this.ack()];
    // A batch without the done seq: the primary does not ask to hold (what was held goes now).
    this.holdingDevice = primaryDoneSeq !== undefined;
    if (primaryDoneSeq !== undefined && primaryDoneSeq > this.primaryDoneSeq) {
      this.primaryDoneSeq = primaryDoneSeq;
    }
    let gap: StandbyMessage | undefined;
    for (const entry of entries) {
      if (entry.seq <= this.receivedSeq) continue; // duplicate: already received
      if (entry.seq !== this.receivedSeq + 1) {
        // A gap: never applied. Ask once per position.
        if (this.gapReportedAt === this.receivedSeq) break;
        this.gapReportedAt = this.receivedSeq;
        this.events.push({ kind: "gap", seq: this.receivedSeq, detail: `got ${entry.seq}` });
        gap = {
          kind: "resync",
          epoch: this.epoch,
          reason: "gap",
          fromSeq: this.receivedSeq + 1,
          detail: `got ${entry.seq}`,
        };
        break;
      }
      this.held.push(entry);
      this.receivedSeq = entry.seq;
    }
    const failed = this.submitHeld();
    if (failed !== undefined) return failed;
    return gap === undefined ? [this.ack()] : [this.ack(), gap];
  }

  /**
   * Hands held entries to the backend, in order, while the primary's device has done them (or
   * all of them when not holding). Returns what to send if one diverged.
   */
  private submitHeld(): StandbyMessage[] | undefined {
    while (this.state === "replica" && !this.held.isEmpty()) {
      const entry = this.held.peekFront()!;
      if (this.holdingDevice && entry.seq > this.primaryDoneSeq) break;
      this.held.shift();
      const failed = this.submit(entry);
      if (failed !== undefined) return failed;
    }
    this.startDigest();
    return undefined;
  }

  /** Applies one entry: its code checked at once, its device work queued under its seq. */
  private submit(entry: Entry): StandbyMessage[] | undefined {
    const result = (this.options.apply ?? applyEntry)(this.backend!, entry);
    if (!result.ok) return this.diverge(entry.seq, result.divergence);
    this.submittedSeq = entry.seq;
    this.appliedEntries++;
    if (result.late) this.awaitDevice(entry, result.late);
    if (this.state !== "replica") return this.withOutbox([]); // a device result diverged
    return undefined;
  }

  /**
   * The primary will do no more (a takeover; or its lease ran out: it is dead, hung or cut off),
   * so nothing is held any longer — what it acknowledged must be in this replica. Each held entry
   * whose frame the primary's DeviceFault named (its device was running it when it failed) is
   * recorded as DEVICE_FAULT — consumed, never run: it may hang this device too — and every
   * other held entry is handed to the device, which applies them before the node serves (the
   * takeover waits for the backlog). What a divergence among them says goes out via poll().
   */
  releaseHeld(): void {
    this.holdingDevice = false;
    if (this.state === "snapshot") {
      this.releaseIntoKept();
      return;
    }
    while (this.state === "replica" && !this.held.isEmpty()) {
      const entry = this.held.shift()!;
      const failed = this.isFaulted(entry) ? this.notRun(entry) : this.submit(entry);
      if (failed !== undefined) this.outbox.push(...failed.filter((m) => m.kind !== "ack"));
    }
    this.held.clear();
  }

  /**
   * During a snapshot the replica it replaces is kept, intact, until it completes: with the
   * primary gone it is the best state left, and a takeover may use it (core/etcd-lease.ts
   * mayAcquire, core/failover.ts standbyWithoutPrimary). The entries held for it were received
   * for it, so they go to its device as in a replica — held for ever, they would be a backlog
   * the takeover waits for and no device ever applies (failover seed 6635: StandbyDriver's
   * awaitDevice recursed until the stack overflowed). Their late results are not compared (the
   * primary's are not coming); a kept replica that diverges on one is dropped: it holds nothing
   * usable any more. A snapshot completed later replaces it all the same.
   */
  private releaseIntoKept(): void {
    const backend = this.backend;
    while (backend !== undefined && !this.held.isEmpty()) {
      const entry = this.held.shift()!;
      const failure = this.isFaulted(entry)
        ? this.recordNotRun(entry)
        : this.applyToKept(backend, entry);
      if (failure !== undefined) {
        this.dropKept(entry.seq, failure);
        return;
      }
    }
    this.held.clear();
  }

  /** Applies one entry to the kept replica; the divergence's detail when it fails. */
  private applyToKept(backend: Backend, entry: Entry): string | undefined {
    const result = (this.options.apply ?? applyEntry)(backend, entry);
    if (!result.ok) return result.divergence;
    this.submittedSeq = entry.seq;
    this.appliedEntries++;
    if (result.late) this.lateUnchecked++;
    return undefined;
  }

  /** The kept replica diverged: gone, the snapshot in progress goes on. */
  private dropKept(seq: number, detail: string): void {
    this.dropBackend();
    this.divergences++;
    this.events.push({ kind: "divergence", seq, detail: `kept replica dropped: ${detail}` });
  }

  private isFaulted(entry: Entry): boolean {
    const b = entry.body;
    if (b.kind !== "call") return false;
    return this.faultedFrames.some(
      (f) => f.seq === entry.seq && f.sessionId === b.sessionId && f.frame === b.frame,
    );
  }

  /** Consumes a faulted frame without running it (as a new primary does on its re-send). */
  private notRun(entry: Entry): StandbyMessage[] | undefined {
    const failure = this.recordNotRun(entry);
    return failure === undefined ? undefined : this.diverge(entry.seq, failure);
  }

  /** notRun's work; the divergence's detail when the frame cannot be recorded. */
  private recordNotRun(entry: Entry): string | undefined {
    const body = entry.body as Extract<Entry["body"], { kind: "call" }>;
    const backend = this.backend!;
    backend.progress.beginSeq(entry.seq);
    const failure = backend.recordFrame(deviceFaultRecord(body.sessionId, body.frame));
    if (failure) return `faulted frame ${body.frame}: ${failure.message}`;
    this.submittedSeq = entry.seq;
    this.faultedNotRun++;
    this.events.push({
      kind: "faultedNotRun",
      seq: entry.seq,
      detail: `${body.sessionId}#${body.frame} (${body.call.op === "kernelLaunch" ? body.call.kernel : body.call.op}) answered DEVICE_FAULT, not run`,
    });
    return undefined;
  }

  /**
   * An entry whose result needs the device: the primary's part is in the entry (an old
   * primary's) or follows as a late result; ours comes once our device ran it.
   */
  private awaitDevice(entry: Entry, late: NonNullable<Extract<ApplyResult, { ok: true }>["late"]>) {
    const { seq, body } = entry;
    const generation = this.generation;
    const backend = this.backend!;
    if (late.kind === "checkpoint") {
      this.late.expect(seq, { kind: "checkpoint", requestId: late.requestId });
      if (late.digest !== "")
        this.settle(this.late.theirs({ seq, kind: "state", digest: late.digest }, seq));
      digestWhenDone(backend, (d) =>
        this.deviceResult(generation, { seq, kind: "state", digest: d.state }),
      );
      return;
    }
    const what = body.kind === "call" ? `call ${body.call.op} frame ${body.frame}` : "entry";
    this.late.expect(seq, { kind: "output", what });
    if (late.theirs.byteLength > 0) {
      this.settle(this.late.theirs({ seq, kind: "output", outputDigest: late.theirs }, seq));
    }
    backend.progress.afterDevice(() =>
      this.deviceResult(generation, {
        seq,
        kind: "output",
        outputDigest: summarizeResult(late.result).outputDigest,
      }),
    );
  }

  private diverge(seq: number, detail: string): StandbyMessage[] {
    this.state = "diverged";
    this.held.clear();
    this.late.clear();
    this.granted = false;
    this.announcedHandover = undefined;
    this.pendingHandover = undefined;
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
      this.sinkLineage = this.primaryLineage;
      this.state = "snapshot";
      this.granted = false;
      this.announcedHandover = undefined;
      this.pendingHandover = undefined;
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
      const installed = sink.result()!;
      installed.lineage = this.sinkLineage; // the history it is a snapshot of
      this.replaceBackend(installed, sink.atSeq);
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
    const holds = this.state === "replica" || this.state === "diverged";
    const appliedSeq = holds ? this.appliedSeq : 0;
    if (this.state === "replica") this.ackedAppliedSeq = appliedSeq;
    return {
      kind: "ack",
      epoch: this.epoch,
      receivedSeq: holds ? this.receivedSeq : 0,
      appliedSeq,
      snapshotId: snapshot?.snapshotId ?? 0,
      snapshotChunk: snapshot?.chunks ?? 0,
      heartbeatSentUs: this.lastHeartbeatUs,
      checkpoints,
    };
  }

  /**
   * A replica of another history than the primary's is dropped, so our hello says empty and
   * the primary sends a snapshot; resumed, it would skip the primary's entries up to our
   * received seq as duplicates and hold the grant with a state the primary never had. Another
   * history is told by its lineage (core/lineage.ts) when both sides know theirs: a replica
   * that once followed another pair's primary, or the pair's own history before a node started
   * it afresh, whatever its length. Without lineages (a build from before them) only a replica
   * holding entries beyond the primary's last seq shows it: a primary that started the pair
   * afresh, told by its probe that we held nothing, while a dead primary's late snapshot was
   * still completing here (failover seed 6495). During a snapshot, the replica it replaces (kept
   * for a takeover) is dropped when its lineage is another; the snapshot goes on.
   */
  private refuseForeign(primaryLastSeq: number): void {
    const backend = this.backend;
    if (backend === undefined) return;
    const lineage = otherLineage(backend.lineage, this.primaryLineage);
    if (this.state === "snapshot" && lineage) {
      this.dropBackend();
      const detail = `kept replica of lineage ${backend.lineage}, not the primary's ${this.primaryLineage}`;
      this.events.push({ kind: "foreignReplica", seq: primaryLastSeq, detail });
      return;
    }
    if (this.state !== "replica") return;
    if (!lineage && this.receivedSeq <= primaryLastSeq) return;
    const detail = lineage
      ? `lineage ${backend.lineage}, not the primary's ${this.primaryLineage} (received ${this.receivedSeq}, the primary's last seq ${primaryLastSeq})`
      : `received ${this.receivedSeq}, beyond the primary's last seq ${primaryLastSeq}`;
    this.dropBackend();
    this.state = "empty";
    this.granted = false;
    this.announcedHandover = undefined;
    this.pendingHandover = undefined;
    this.events.push({ kind: "foreignReplica", seq: primaryLastSeq, detail });
  }

  /** Drains the events recorded since the last call (for logs and metrics). */
  takeEvents(): ReceiverEvent[] {
    return this.events.splice(0);
  }
}
