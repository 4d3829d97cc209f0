// The primary's replication log: one total order over every session's state changes, seq
// gapless from 1. Entries stay until the standby has applied them; applied entries are kept
// up to `retainBytes` more so a standby that reconnects can resume instead of re-snapshotting.
// Retention counts what entries cost in heap (entryHeapBytes), not their wire bytes: a small
// entry takes ~100 B on the wire and ~460 B of heap, so counting wire bytes let 64 MiB of
// retainBytes hold ~500 MiB of heap.

import { type Entry, type EntryBody, entryBytes, entryHeapBytes } from "./entries.js";
import { invariant } from "./errors.js";
import type { LateResult } from "./messages.js";

interface Stored {
  readonly entry: Entry;
  readonly bytes: number;
  /** Bytes of every entry appended up to and including this one. */
  readonly cumBytes: number;
  /** entryHeapBytes of every entry appended up to and including this one. */
  readonly cumHeapBytes: number;
  readonly appendedMs: number;
}

export class ReplicationLog {
  private stored: Stored[] = [];
  private head = 0;
  private last: number;
  private bytesHeld = 0;
  private cumBytes = 0;
  private cumHeapBytes = 0;
  /** cumBytes of the newest dropped entry. */
  private droppedCumBytes = 0;
  /** cumHeapBytes of the newest dropped entry. */
  private droppedCumHeapBytes = 0;

  /**
   * Results of retained entries that needed the primary's device (a dmaRead's output digest, a
   * checkpoint's state digest), in seq order, from lateHead on: they follow their entries to
   * the standby (messages.ts LateResult).
   */
  private late: LateResult[] = [];
  private lateHead = 0;
  /** Late results after this seq are kept even once their entries are dropped (unsent yet). */
  private lateHeldAfter = Number.POSITIVE_INFINITY;

  /** A log that continues after `lastSeq` (0 for a new cluster). */
  constructor(lastSeq = 0) {
    this.last = lastSeq;
  }

  get lastSeq(): number {
    return this.last;
  }

  /** The oldest seq still held; lastSeq + 1 when the log holds nothing. */
  get firstRetainedSeq(): number {
    const first = this.stored[this.head];
    return first ? first.entry.seq : this.last + 1;
  }

  get heldBytes(): number {
    return this.bytesHeld;
  }

  get heldEntries(): number {
    return this.stored.length - this.head;
  }

  append(body: EntryBody, nowMs: number): Entry {
    const entry: Entry = { seq: this.last + 1, body };
    const bytes = entryBytes(body);
    this.cumBytes += bytes;
    this.cumHeapBytes += entryHeapBytes(body);
    this.stored.push({
      entry,
      bytes,
      cumBytes: this.cumBytes,
      cumHeapBytes: this.cumHeapBytes,
      appendedMs: nowMs,
    });
    this.last = entry.seq;
    this.bytesHeld += bytes;
    return entry;
  }

  /**
   * The device produced entry `r.seq`'s late result: kept while the entry is, or while the
   * sender has not sent it (holdLateAfter).
   */
  addLate(r: LateResult): void {
    invariant(r.seq <= this.last, `late result of seq ${r.seq} beyond the log`);
    if (r.seq < this.firstRetainedSeq && r.seq <= this.lateHeldAfter) return;
    let i = this.late.length;
    while (i > this.lateHead && this.late[i - 1]!.seq > r.seq) i--;
    this.late.splice(i, 0, r);
  }

  /**
   * The sender has sent the late results up to `seq` on its live link (infinity: it has no
   * live link; a standby that connects resumes after a retained entry).
   */
  holdLateAfter(seq: number): void {
    this.lateHeldAfter = seq;
  }

  /** The late results of entries after `afterSeq` up to `uptoSeq`, at most `max`. */
  lateBetween(afterSeq: number, uptoSeq: number, max: number): LateResult[] {
    const out: LateResult[] = [];
    for (let i = this.lateHead; i < this.late.length && out.length < max; i++) {
      const r = this.late[i]!;
      if (r.seq > uptoSeq) break;
      if (r.seq > afterSeq) out.push(r);
    }
    return out;
  }

  has(seq: number): boolean {
    return seq >= this.firstRetainedSeq && seq <= this.last;
  }

  /** Entries from `fromSeq` on, at most maxEntries and about maxBytes (at least one). */
  read(fromSeq: number, maxEntries: number, maxBytes: number): Entry[] {
    invariant(this.has(fromSeq) || fromSeq === this.last + 1, `log read from ${fromSeq}`);
    const out: Entry[] = [];
    let bytes = 0;
    for (let i = this.head + (fromSeq - this.firstRetainedSeq); i < this.stored.length; i++) {
      const s = this.stored[i]!;
      if (out.length >= maxEntries || (out.length > 0 && bytes + s.bytes > maxBytes)) break;
      out.push(s.entry);
      bytes += s.bytes;
    }
    return out;
  }

  /** Bytes of the entries after `afterSeq` up to `uptoSeq` (dropped ones count as 0). */
  bytesBetween(afterSeq: number, uptoSeq: number): number {
    return Math.max(0, this.cumAt(uptoSeq) - this.cumAt(afterSeq));
  }

  private cumAt(seq: number): number {
    const first = this.firstRetainedSeq;
    if (seq < first) return this.droppedCumBytes;
    if (seq > this.last) return this.cumBytes;
    return this.stored[this.head + (seq - first)]!.cumBytes;
  }

  /** Bytes and age of the entries after `appliedSeq` (what the standby lags by). */
  lagAfter(appliedSeq: number, nowMs: number): { entries: number; bytes: number; seconds: number } {
    const entries = Math.max(0, this.last - appliedSeq);
    if (entries === 0) return { entries: 0, bytes: 0, seconds: 0 };
    const from = Math.max(appliedSeq + 1, this.firstRetainedSeq);
    const oldest = this.stored[this.head + (from - this.firstRetainedSeq)];
    return {
      entries,
      bytes: this.bytesBetween(appliedSeq, this.last),
      seconds: oldest ? (nowMs - oldest.appendedMs) / 1000 : 0,
    };
  }

  /**
   * Drops entries up to `seq` (applied by the standby, or of no use to anyone) while more
   * than `retainBytes` of heap (entryHeapBytes) would stay in them.
   */
  release(seq: number, retainBytes: number): void {
    const limit = Math.min(seq, this.last);
    let keptApplied = this.cumHeapAt(limit) - this.droppedCumHeapBytes;
    while (keptApplied > retainBytes && this.head < this.stored.length) {
      const s = this.stored[this.head]!;
      if (s.entry.seq > limit) break;
      this.head++;
      keptApplied -= s.cumHeapBytes - this.droppedCumHeapBytes;
      this.bytesHeld -= s.bytes;
      this.droppedCumBytes = s.cumBytes;
      this.droppedCumHeapBytes = s.cumHeapBytes;
    }
    if (this.head > 4096 && this.head * 2 > this.stored.length) {
      this.stored = this.stored.slice(this.head);
      this.head = 0;
    }
    const first = Math.min(this.firstRetainedSeq, this.lateHeldAfter + 1);
    while (this.lateHead < this.late.length && this.late[this.lateHead]!.seq < first) {
      this.lateHead++;
    }
    if (this.lateHead > 1024 && this.lateHead * 2 > this.late.length) {
      this.late = this.late.slice(this.lateHead);
      this.lateHead = 0;
    }
  }

  private cumHeapAt(seq: number): number {
    const first = this.firstRetainedSeq;
    if (seq < first) return this.droppedCumHeapBytes;
    if (seq > this.last) return this.cumHeapBytes;
    return this.stored[this.head + (seq - first)]!.cumHeapBytes;
  }
}
