// Watches what the standby applies, independently of the Receiver's own bookkeeping: the
// applier is wrapped so every applied entry is seen. Per standby incarnation (a restart is a
// new, empty process) it knows which seqs the standby's state holds: everything up to the last
// snapshot's seq, then each entry applied since, which must follow it exactly (no double
// apply, no gap) and be the very entry the primary appended at that seq. And what a sync reply
// was released on must stay held: a snapshot may not take the standby back below it.
import { isDeepStrictEqual } from "node:util";
import type { Entry } from "@vgpu-ha/common";
import type { Backend } from "@vgpu-ha/gpu-model";
import { type ApplyResult, applyEntry, type Receiver, type ReceiverEvent } from "@vgpu-ha/standby";

export class SimFailure extends Error {}

export class StandbyMonitor {
  /** The primary's entries by seq (index seq - 1). */
  private readonly primaryEntries: readonly Entry[];
  incarnation = 0;
  receiver: Receiver | undefined;
  /** The state of this incarnation holds every seq up to this one; -1 before its first snapshot. */
  coveredSeq = -1;
  /** The highest seq a sync reply was released on while this incarnation was in sync. */
  releasedSeq = 0;
  applied = 0;
  snapshotsInstalled = 0;

  constructor(primaryEntries: readonly Entry[]) {
    this.primaryEntries = primaryEntries;
  }

  /** A standby process started: nothing of the previous one's state survives. */
  newIncarnation(receiver: Receiver): void {
    this.incarnation++;
    this.receiver = receiver;
    this.coveredSeq = -1;
    this.releasedSeq = 0;
  }

  /** A sync reply was released on `seq`: this incarnation must hold it from now on. */
  noteReleased(seq: number): void {
    if (seq > this.releasedSeq) this.releasedSeq = seq;
  }

  /** The applier the Receiver is given. */
  readonly apply = (backend: Backend, entry: Entry): ApplyResult => {
    const where = `standby #${this.incarnation}`;
    if (this.receiver === undefined || backend !== this.receiver.backend) {
      throw new SimFailure(`${where} applied seq ${entry.seq} to a backend that is not its own`);
    }
    if (this.coveredSeq < 0) {
      throw new SimFailure(`${where} applied seq ${entry.seq} before any snapshot`);
    }
    if (entry.seq !== this.coveredSeq + 1) {
      const what = entry.seq <= this.coveredSeq ? "double apply" : "gap";
      throw new SimFailure(`${where}: ${what}: applied seq ${entry.seq} after ${this.coveredSeq}`);
    }
    // The object appended, or (resent from the retained log's bytes) an equal one.
    const primary = this.primaryEntries[entry.seq - 1];
    if (entry !== primary && !isDeepStrictEqual(entry, primary)) {
      throw new SimFailure(
        `${where} applied seq ${entry.seq}, not the primary's entry of that seq`,
      );
    }
    const result = applyEntry(backend, entry);
    if (result.ok) {
      this.coveredSeq = entry.seq;
      this.applied++;
    }
    return result;
  };

  /** The Receiver's events after a step; a snapshot it installed resets what it holds. */
  onEvents(events: readonly ReceiverEvent[]): void {
    for (const e of events) {
      switch (e.kind) {
        case "snapshotDone":
          if (e.seq < this.releasedSeq) {
            throw new SimFailure(
              `standby #${this.incarnation} installed a snapshot at seq ${e.seq}, losing acknowledged seqs up to ${this.releasedSeq} (${e.detail})`,
            );
          }
          this.coveredSeq = e.seq;
          this.snapshotsInstalled++;
          break;
        case "divergence":
          throw new SimFailure(
            `standby #${this.incarnation} diverged at seq ${e.seq}: ${e.detail}`,
          );
        case "staleEpoch":
          throw new SimFailure(`standby #${this.incarnation} saw a stale epoch: ${e.detail}`);
        default:
          break;
      }
    }
  }
}
