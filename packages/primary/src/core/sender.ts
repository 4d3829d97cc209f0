// The primary's sending state machine for one standby. Pure: the shell feeds it connection
// events, the standby's messages and the time, and sends what poll() returns.
//
//   disconnected → (connected) hello → standby hello → resume from its last applied seq when
//   the log still holds what follows, else a consistent snapshot at seq S then entries > S →
//   streaming: entries in seq order, many in flight (bounded), cumulative acks.
// The standby acknowledges two seqs: received (handed to its device) and applied (its device
// completed them). The window and resends follow the received one; what the log may drop and
// the role's grant and back-pressure follow the applied one. Late results (what only the
// primary's device could tell, log.addLate) follow their entries. With holdStandby, the
// standby holds each entry's device work until this node's device has done it: the done seq
// rides on every entry batch (one with no entries when only it advanced), never waiting for a
// kernel; its presence is what asks the standby to hold.
// Gaps and duplicates are the receiver's business; the sender resends from a requested seq,
// or from the last acknowledged one when acks stop coming (retransmitMs).
import {
  announcedVersion,
  chunkBytes,
  ErrorCode,
  helloRefusal,
  type LateResult,
  NO_HELLO,
  type NodeVersion,
  otherLineage,
  type PrimaryMessage,
  REPLICATION_PROTOCOL_VERSION,
  type ReplicationLog,
  type SnapshotChunk,
  type StandbyMessage,
} from "@vgpu-ha/common/core";
import { DeviceFaultNotice } from "./device-fault-notice.js";
import type { SenderEvent, SenderOptions, SenderState, SnapshotStream } from "./sender-types.js";

export type { SenderEvent, SenderOptions, SenderState, SnapshotStream } from "./sender-types.js";

interface SnapshotProgress {
  readonly stream: SnapshotStream;
  /** Chunks produced and not yet acknowledged, oldest first (kept to resend). */
  readonly unacked: SnapshotChunk[];
  /** The stream's coveredBytes after each unacked chunk was produced (same order). */
  readonly unackedCoveredBytes: number[];
  /** Buffer bytes covered by the chunks the standby acknowledged. */
  doneBytes: number;
  /** Index of unacked[0]. */
  ackedChunks: number;
  produced: number;
  exhausted: boolean;
  bytesSent: number;
  readonly startedMs: number;
}

export class Sender {
  readonly options: SenderOptions;
  private readonly log: ReplicationLog;
  private readonly startSnapshot: () => SnapshotStream;
  epoch: number;
  state: SenderState = "disconnected";
  /** The standby's cumulative applied seq while it is a replica (its device completed them). */
  appliedSeq = 0;
  /** The standby's cumulative received seq (≥ appliedSeq): handed to its device. */
  receivedSeq = 0;
  private sentSeq = 0;
  /** Late results of entries up to this seq are sent. */
  private lateSentSeq = 0;
  /** The highest device done seq seen (a later digest's hashing may lower doneSeq a while). */
  private deviceDoneHigh = 0;
  /** The done seq last told on this connection (holdStandby). */
  private doneSentSeq = 0;
  private snapshot: SnapshotProgress | undefined;
  private lastHeartbeatMs = Number.NEGATIVE_INFINITY;
  private lastProgressMs = 0;
  private pendingHello = false;
  /** Sent in every hello: authenticates this primary's lease channel (undefined: none). */
  leaseKey: Uint8Array | undefined;
  /**
   * The history this primary's state belongs to (core/lineage.ts), sent in every hello; a
   * standby's replica of another lineage is not resumed. "": none (as a build without them).
   */
  lineage = "";
  /** The other end of this connection said a hello naming our peer of our cluster. */
  private peerVerified = false;
  /** This connection's peer was refused for its version: its error says so again, uncounted. */
  private versionRefused = false;
  /** What the peer runs, from its last hello naming it (refused for its version or not). */
  peerVersion: NodeVersion | undefined;
  /**
   * The standby of this connection pulls snapshot pages (its hello said so): chunks after the
   * first go to its pull stream (the shell's SnapshotOutlet), not to this connection.
   */
  peerPullsSnapshots = false;
  /**
   * The sync grant carried by every heartbeat (see core/release.ts); the primary role sets it.
   * A change is sent at once.
   */
  get syncGrant(): boolean {
    return this.grant;
  }
  set syncGrant(value: boolean) {
    if (value !== this.grant) this.lastHeartbeatMs = Number.NEGATIVE_INFINITY;
    this.grant = value;
  }
  private grant = false;
  /** Newest heartbeat send time the standby echoed (µs; the lease counts from it). */
  ackedHeartbeatUs = 0;
  /** Maintenance mode, carried on every heartbeat (the node sets it; vgpuctl pause). */
  maintenancePaused = false;
  readonly events: SenderEvent[] = [];
  /** Totals for metrics. */
  readonly totals = { entriesSent: 0, bytesSent: 0, snapshotsStarted: 0, snapshotBytes: 0 };
  lastSnapshot: { bytes: number; seconds: number } | undefined;

  constructor(
    options: SenderOptions,
    log: ReplicationLog,
    startSnapshot: () => SnapshotStream,
    epoch: number,
  ) {
    this.options = options;
    this.log = log;
    this.startSnapshot = startSnapshot;
    this.epoch = epoch;
  }

  /** A standby is streaming: its acks gate guest replies in sync mode. */
  get inSync(): boolean {
    return this.state === "streaming";
  }

  get snapshotProgress():
    | {
        snapshotId: number;
        atSeq: number;
        chunksAcked: number;
        bytesSent: number;
        totalBytes: number;
        doneBytes: number;
        startedMs: number;
      }
    | undefined {
    const s = this.snapshot;
    return s
      ? {
          snapshotId: s.stream.snapshotId,
          atSeq: s.stream.atSeq,
          chunksAcked: s.ackedChunks,
          bytesSent: s.bytesSent,
          totalBytes: s.stream.totalBytes ?? 0,
          doneBytes: s.doneBytes,
          startedMs: s.startedMs,
        }
      : undefined;
  }

  connected(nowMs: number): void {
    this.peerVerified = false;
    this.peerPullsSnapshots = false;
    this.versionRefused = false;
    this.state = "hello";
    this.pendingHello = true;
    this.doneSentSeq = 0;
    this.lastProgressMs = nowMs;
    this.lastHeartbeatMs = Number.NEGATIVE_INFINITY;
  }

  /** The link broke. A snapshot in progress is kept so the standby can resume it. */
  disconnected(): void {
    this.state = "disconnected";
    this.appliedSeq = 0;
    this.receivedSeq = 0;
    this.log.holdLateAfter(Number.POSITIVE_INFINITY);
    this.pendingHello = false;
    if (this.pendingHandover) this.pendingHandover.sentMs = undefined; // again on the next stream
  }

  /** The seq below which the log may drop entries (beyond its retention). */
  get releasableSeq(): number {
    if (this.snapshot) return this.snapshot.stream.atSeq;
    if (this.state === "streaming") return this.appliedSeq;
    return this.log.lastSeq;
  }

  step(message: StandbyMessage, nowMs: number): void {
    // Until the other end has named itself as our peer, nothing it says is believed — above all
    // not its epoch, or any stranger at the peer's address could make this primary step down.
    if (!this.peerVerified && !this.verifyPeer(message)) return;
    if (message.epoch > this.epoch) {
      this.events.push({ kind: "higherEpoch", epoch: message.epoch });
      return;
    }
    switch (message.kind) {
      case "hello":
        // The first hello of a connection moves the handshake on; any later one is a copy (the
        // standby answers each of the primary's hellos, which are repeated until answered).
        if (this.state === "hello") this.onHello(message, nowMs);
        return;
      case "ack":
        this.onAck(message, nowMs);
        return;
      case "resync":
        this.events.push({ kind: "resync", reason: message.reason, detail: message.detail });
        if (message.reason === "gap") {
          // A gap report from before a snapshot or for what is already acknowledged is stale.
          if (this.state !== "streaming" || message.fromSeq <= this.receivedSeq) return;
          if (this.log.has(message.fromSeq)) this.resendAfter(message.fromSeq - 1);
          else this.beginSnapshot(nowMs);
          return;
        }
        this.beginSnapshot(nowMs);
        return;
      case "error":
        this.events.push({ kind: "refused", code: message.code, message: message.message });
        return;
    }
  }

  /** The first message of a connection must be the peer's hello (peer-identity.ts). */
  private verifyPeer(message: StandbyMessage): boolean {
    const o = this.options;
    if (message.kind === "error" && this.versionRefused) return false;
    const why =
      message.kind === "hello"
        ? helloRefusal(
            { clusterId: o.clusterId, nodeId: o.nodeId, peerName: o.peerName, version: o.version },
            message,
          )
        : { ...NO_HELLO, message: `a ${message.kind} before the standby's hello` };
    if (message.kind === "hello" && (why === null || why.versions)) {
      this.peerVersion = announcedVersion(message);
    }
    if (why === null) {
      this.peerVerified = true;
      return true;
    }
    if (why.versions) this.versionRefused = true;
    this.events.push({ kind: "refused", code: why.code, message: why.message, reason: why.reason });
    return false;
  }

  private onHello(hello: Extract<StandbyMessage, { kind: "hello" }>, nowMs: number): void {
    this.peerPullsSnapshots = hello.pullsSnapshots === true;
    const s = this.snapshot;
    if (s && hello.snapshotId === s.stream.snapshotId && hello.snapshotChunk >= s.ackedChunks) {
      this.ackSnapshot(hello.snapshotChunk);
      this.state = "snapshot";
      this.events.push({
        kind: "snapshotResumed",
        snapshotId: s.stream.snapshotId,
        chunk: hello.snapshotChunk,
      });
      return;
    }
    // A replica of another history (core/lineage.ts) is never resumed, whatever its length
    // (the standby drops it on our hello: this is its older builds' and our own guard).
    const resumable =
      !hello.empty &&
      !otherLineage(hello.lineage ?? "", this.lineage) &&
      hello.lastAppliedSeq <= this.log.lastSeq &&
      (hello.lastAppliedSeq === this.log.lastSeq || this.log.has(hello.lastAppliedSeq + 1));
    if (resumable) {
      this.dropSnapshot();
      this.state = "streaming";
      this.appliedSeq = hello.lastAppliedSeq;
      this.receivedSeq = hello.lastAppliedSeq;
      this.sentSeq = hello.lastAppliedSeq;
      this.setLateSent(hello.lastAppliedSeq);
      this.lastProgressMs = nowMs;
      this.events.push({ kind: "resumed", fromSeq: hello.lastAppliedSeq + 1 });
      return;
    }
    this.beginSnapshot(nowMs);
  }

  private onAck(ack: Extract<StandbyMessage, { kind: "ack" }>, nowMs: number): void {
    if (ack.heartbeatSentUs > this.ackedHeartbeatUs) this.ackedHeartbeatUs = ack.heartbeatSentUs;
    if (ack.handoverAccepted) {
      this.pendingHandover = undefined;
      this.events.push({ kind: "handoverAccepted" });
    }
    for (const c of ack.checkpoints) this.events.push({ kind: "checkpoint", ...c });
    const s = this.snapshot;
    if (this.state === "snapshot" && s) {
      if (ack.snapshotId === s.stream.snapshotId && ack.snapshotChunk > s.ackedChunks) {
        this.ackSnapshot(ack.snapshotChunk);
        this.lastProgressMs = nowMs;
      }
      if (!s.exhausted || s.unacked.length > 0) return;
      this.finishSnapshot(nowMs);
      // The same ack says how far the standby's device has applied the installed state.
    }
    if (this.state !== "streaming") return;
    // Nothing beyond the log can have been received: such an ack is not believed (it would
    // release sync replies for frames the standby does not hold).
    const received = Math.max(ack.receivedSeq, ack.appliedSeq);
    if (received > this.log.lastSeq) {
      this.events.push({
        kind: "refused",
        code: ErrorCode.MALFORMED,
        message: `ack of seq ${received} beyond the log's last ${this.log.lastSeq}`,
      });
      return;
    }
    if (received > this.receivedSeq) {
      this.receivedSeq = received;
      this.lastProgressMs = nowMs;
    }
    if (ack.appliedSeq > this.appliedSeq) {
      this.appliedSeq = ack.appliedSeq;
      this.lastProgressMs = nowMs;
    }
    if (this.sentSeq < this.receivedSeq) this.sentSeq = this.receivedSeq;
  }

  /**
   * The chunks produced and not yet acknowledged of snapshot `snapshotId` from index `from` on,
   * for a standby that (re)opens its pull there; undefined when that is not the snapshot being
   * sent to a verified peer now, or `from` is outside what is held (acknowledged already, or not
   * produced yet): a stale pull.
   */
  snapshotChunksFrom(snapshotId: number, from: number): SnapshotChunk[] | undefined {
    const s = this.snapshot;
    if (this.state !== "snapshot" || s === undefined || s.stream.snapshotId !== snapshotId) {
      return undefined;
    }
    if (from < s.ackedChunks || from > s.produced) return undefined;
    return s.unacked.slice(from - s.ackedChunks);
  }

  /** Sends again everything after `seq` (entries and late results). */
  private resendAfter(seq: number): void {
    this.sentSeq = seq;
    this.setLateSent(Math.min(this.lateSentSeq, seq));
  }

  private ackSnapshot(received: number): void {
    const s = this.snapshot!;
    while (s.ackedChunks < received && s.unacked.length > 0) {
      const chunk = s.unacked.shift()!;
      // A pulled chunk was encoded onto the pull's stream before the standby could have it; one
      // sent on the link may still be read by the receiver (an in-process link passes the
      // object itself, as the simulators do), so its memory is not reused.
      if (this.peerPullsSnapshots) s.stream.recycle?.(chunk);
      s.doneBytes = s.unackedCoveredBytes.shift() ?? s.doneBytes;
      s.ackedChunks++;
    }
  }

  private beginSnapshot(nowMs: number): void {
    this.dropSnapshot();
    const stream = this.startSnapshot();
    this.snapshot = {
      stream,
      unacked: [],
      unackedCoveredBytes: [],
      doneBytes: 0,
      ackedChunks: 0,
      produced: 0,
      exhausted: false,
      bytesSent: 0,
      startedMs: nowMs,
    };
    this.state = "snapshot";
    this.appliedSeq = 0;
    this.receivedSeq = 0;
    this.log.holdLateAfter(Number.POSITIVE_INFINITY);
    this.lastProgressMs = nowMs;
    this.totals.snapshotsStarted++;
    this.events.push({
      kind: "snapshotStarted",
      snapshotId: stream.snapshotId,
      atSeq: stream.atSeq,
    });
  }

  private finishSnapshot(nowMs: number): void {
    const s = this.snapshot!;
    this.events.push({
      kind: "snapshotDone",
      snapshotId: s.stream.snapshotId,
      atSeq: s.stream.atSeq,
    });
    this.lastSnapshot = { bytes: s.bytesSent, seconds: (nowMs - s.startedMs) / 1000 };
    this.state = "streaming";
    // Received; applied once the standby's device has written the snapshot (its acks say).
    this.appliedSeq = 0;
    this.receivedSeq = s.stream.atSeq;
    this.sentSeq = s.stream.atSeq;
    this.setLateSent(s.stream.atSeq);
    this.snapshot = undefined;
  }

  private dropSnapshot(): void {
    this.snapshot?.stream.release();
    this.snapshot = undefined;
  }

  /**
   * A handover to send, until the standby says it accepted it: sent again on a new stream or
   * when no acceptance came within retransmitMs (a lost handover would stall the guests, who
   * are held, for the whole switchover timeout).
   */
  private pendingHandover:
    | { lastSeq: number; digest: string; sentMs: number | undefined }
    | undefined;

  /** Queues a handover (planned switchover); the caller has stopped taking frames. */
  handover(digest: string): void {
    this.pendingHandover = { lastSeq: this.log.lastSeq, digest, sentMs: undefined };
  }

  /** This node's device failed: what to tell the standby (device-fault-notice.ts). */
  readonly fault = new DeviceFaultNotice();

  /** The switchover was given up: send no (more) handover. */
  cancelHandover(): void {
    this.pendingHandover = undefined;
  }

  /** What to send now. */
  poll(nowMs: number): PrimaryMessage[] {
    const out: PrimaryMessage[] = [];
    if (this.state === "disconnected") return out;
    if (this.state === "hello" && nowMs - this.lastProgressMs > this.options.retransmitMs) {
      this.pendingHello = true; // no answer yet: say hello again
      this.lastProgressMs = nowMs;
    }
    if (this.pendingHello) {
      this.pendingHello = false;
      out.push({
        kind: "hello",
        epoch: this.epoch,
        clusterId: this.options.clusterId,
        nodeId: this.options.nodeId,
        firstRetainedSeq: this.log.firstRetainedSeq,
        lastSeq: this.log.lastSeq,
        ...(this.leaseKey !== undefined ? { leaseKey: this.leaseKey } : {}),
        ...(this.lineage !== "" ? { lineage: this.lineage } : {}),
        // Without a version: this build's protocol (a hello without one is protocol 1).
        ...(this.options.version ?? { protocolVersion: REPLICATION_PROTOCOL_VERSION }),
      });
    }
    if (this.state === "snapshot") this.pollSnapshot(nowMs, out);
    else if (this.state === "streaming") this.pollEntries(nowMs, out);
    this.fault.poll(this.state === "streaming", this.sentSeq, this.epoch, out);
    const h = this.pendingHandover;
    const due = h && (h.sentMs === undefined || nowMs - h.sentMs > this.options.retransmitMs);
    if (h && due && this.state === "streaming" && this.sentSeq === this.log.lastSeq) {
      out.push({ kind: "handover", epoch: this.epoch, lastSeq: h.lastSeq, digest: h.digest });
      h.sentMs = nowMs;
      // An announcement (empty digest) is a hint, not awaited: sent once.
      if (h.digest === "") this.pendingHandover = undefined;
    }
    if (this.state !== "hello" && nowMs - this.lastHeartbeatMs >= this.options.heartbeatMs) {
      this.lastHeartbeatMs = nowMs;
      out.push({
        kind: "heartbeat",
        epoch: this.epoch,
        sentUs: Math.round(nowMs * 1000),
        lastSeq: this.log.lastSeq,
        syncReplica: this.syncGrant,
        maintenancePaused: this.maintenancePaused,
      });
      // The done seq again while the standby has not applied up to it: a copy lost on the way
      // would otherwise leave it holding for good once this device goes idle.
      const done = this.doneSentSeq;
      if (this.state === "streaming" && this.options.holdStandby && this.appliedSeq < done) {
        out.push({ kind: "entries", epoch: this.epoch, entries: [], primaryDoneSeq: done });
      }
    }
    return out;
  }

  private pollSnapshot(nowMs: number, out: PrimaryMessage[]): void {
    const s = this.snapshot!;
    if (nowMs - this.lastProgressMs > this.options.retransmitMs && s.unacked.length > 0) {
      for (const chunk of s.unacked) out.push({ kind: "snapshot", epoch: this.epoch, chunk });
      this.lastProgressMs = nowMs;
    }
    while (!s.exhausted && s.unacked.length < this.options.snapshotWindowChunks) {
      if (s.stream.ready?.() === false) break; // the device is reading it: polled again then
      const chunk = s.stream.next();
      if (chunk === undefined) {
        s.exhausted = true;
        break;
      }
      if (chunk.last) s.exhausted = true;
      s.unacked.push(chunk);
      s.unackedCoveredBytes.push(s.stream.coveredBytes ?? 0);
      s.produced++;
      const bytes = chunkBytes(chunk);
      s.bytesSent += bytes;
      this.totals.snapshotBytes += bytes;
      out.push({ kind: "snapshot", epoch: this.epoch, chunk });
    }
  }

  private pollEntries(nowMs: number, out: PrimaryMessage[]): void {
    const acked = this.receivedSeq;
    if (this.sentSeq > acked && nowMs - this.lastProgressMs > this.options.retransmitMs) {
      this.resendAfter(acked); // acks stopped: go back and resend
      this.lastProgressMs = nowMs;
    }
    if (this.sentSeq < this.log.firstRetainedSeq - 1) {
      this.beginSnapshot(nowMs); // what the standby needs is gone
      return;
    }
    const { maxBatchEntries, maxBatchBytes, maxInflightEntries, maxInflightBytes } = this.options;
    while (this.sentSeq < this.log.lastSeq) {
      const inflight = this.sentSeq - acked;
      if (inflight >= maxInflightEntries) break;
      if (this.log.bytesBetween(acked, this.sentSeq) >= maxInflightBytes) break;
      const entries = this.log.read(
        this.sentSeq + 1,
        Math.min(maxBatchEntries, maxInflightEntries - inflight),
        maxBatchBytes,
      );
      if (entries.length === 0) break;
      this.sentSeq = entries.at(-1)!.seq;
      this.totals.entriesSent += entries.length;
      out.push({
        kind: "entries",
        epoch: this.epoch,
        entries,
        ...this.lateUpTo(this.sentSeq),
        ...this.doneUpTo(this.sentSeq),
      });
    }
    const late = this.lateUpTo(this.sentSeq);
    const advanced = this.doneAdvanced(this.sentSeq);
    if (late.lateResults || advanced) {
      out.push({
        kind: "entries",
        epoch: this.epoch,
        entries: [],
        ...late,
        ...this.doneUpTo(this.sentSeq),
      });
    }
  }

  /** Whether the device done seq (at most `seq`) moved past the one last told (holdStandby). */
  private doneAdvanced(seq: number): boolean {
    if (this.options.holdStandby !== true) return false;
    // Never past the log as it is now: work of an entry appended later is not done by this.
    const now = Math.min(this.options.deviceDoneSeq?.() ?? this.log.lastSeq, this.log.lastSeq);
    if (now > this.deviceDoneHigh) this.deviceDoneHigh = now;
    return Math.min(this.deviceDoneHigh, seq) > this.doneSentSeq;
  }

  /**
   * What every entry batch carries while holdStandby: the device done seq, at most `seq` (what
   * the standby was sent). Absent otherwise: the standby then applies on receipt.
   */
  private doneUpTo(seq: number): { primaryDoneSeq?: number } {
    if (this.options.holdStandby !== true) return {};
    this.doneAdvanced(seq);
    const done = Math.max(this.doneSentSeq, Math.min(this.deviceDoneHigh, seq));
    this.doneSentSeq = done;
    return { primaryDoneSeq: done };
  }

  /** The late results not yet sent of entries up to `seq` (sent already or in this batch). */
  private lateUpTo(seq: number): { lateResults?: LateResult[] } {
    const late = this.log.lateBetween(this.lateSentSeq, seq, this.options.maxBatchEntries);
    if (late.length === 0) return {};
    this.setLateSent(late.at(-1)!.seq);
    return { lateResults: late };
  }

  /** Late results up to `seq` are sent; the log keeps those after it until they are. */
  private setLateSent(seq: number): void {
    this.lateSentSeq = seq;
    this.log.holdLateAfter(seq);
  }

  takeEvents(): SenderEvent[] {
    return this.events.splice(0);
  }
}
