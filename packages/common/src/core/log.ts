// The primary's replication log: one total order over every session's state changes, seq
// gapless from 1. Entries stay until the standby has applied them; applied entries are kept
// up to `retainBytes` more so a standby that reconnects can resume instead of re-snapshotting.
// Entries not yet applied are held as objects (the sender reads them soon); once applied they
// are kept as their packed bytes in slabs (retained-slabs.ts), and retainBytes bounds what the
// slabs really take in heap: ~40 B for a small call, where an entry's objects took ~600 B.

import { type Entry, type EntryBody, entryBytes } from "./entries.js";
import { invariant } from "./errors.js";
import type { LateResult } from "./messages.js";
import { RetainedSlabs } from "./retained-slabs.js";

interface Stored {
  readonly entry: Entry;
  readonly bytes: number;
  /** Bytes of every entry appended up to and including this one. */
  readonly cumBytes: number;
  readonly appendedMs: number;
}

export class ReplicationLog {
  /** Entries not yet released as applied, from `head` on; those before sit in `retained`. */
  private stored: Stored[] = [];
  private head = 0;
  private readonly retained = new RetainedSlabs();
  private last: number;
  private bytesHeld = 0;
  private cumBytes = 0;
  /** cumBytes of the newest dropped entry. */
  private droppedCumBytes = 0;

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
    const retained = this.retained.firstSeq;
    if (retained !== undefined) return retained;
    const first = this.stored[this.head];
    return first ? first.entry.seq : this.last + 1;
  }

  get heldBytes(): number {
    return this.bytesHeld;
  }

  get heldEntries(): number {
    return this.retained.count + this.stored.length - this.head;
  }

  /** Heap of the applied entries kept for resumes (what retainBytes bounds). */
  get retainedHeapBytes(): number {
    return this.retained.heapBytes;
  }

  append(body: EntryBody, nowMs: number): Entry {
    const entry: Entry = { seq: this.last + 1, body };
    const bytes = entryBytes(body);
    this.cumBytes += bytes;
    this.stored.push({ entry, bytes, cumBytes: this.cumBytes, appendedMs: nowMs });
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

  /**
   * Entries from `fromSeq` on, at most maxEntries and about maxBytes (at least one). Retained
   * (applied) entries are decoded from their bytes: equal values, not the objects appended.
   */
  read(fromSeq: number, maxEntries: number, maxBytes: number): Entry[] {
    invariant(this.has(fromSeq) || fromSeq === this.last + 1, `log read from ${fromSeq}`);
    const out: Entry[] = [];
    let bytes = 0;
    let seq = fromSeq;
    const retainedLast = this.retained.lastSeq ?? 0;
    for (; seq <= retainedLast; seq++) {
      const size = this.retained.bytesAt(seq);
      if (out.length >= maxEntries || (out.length > 0 && bytes + size > maxBytes)) return out;
      out.push(this.retained.entryAt(seq));
      bytes += size;
    }
    for (let i = this.head + (seq - this.liveFirstSeq); i < this.stored.length; i++) {
      const s = this.stored[i]!;
      if (out.length >= maxEntries || (out.length > 0 && bytes + s.bytes > maxBytes)) break;
      out.push(s.entry);
      bytes += s.bytes;
    }
    return out;
  }

  /** The first seq held as an object (not yet released as applied). */
  private get liveFirstSeq(): number {
    return this.stored[this.head]?.entry.seq ?? this.last + 1;
  }

  /** Bytes of the entries after `afterSeq` up to `uptoSeq` (dropped ones count as 0). */
  bytesBetween(afterSeq: number, uptoSeq: number): number {
    return Math.max(0, this.cumAt(uptoSeq) - this.cumAt(afterSeq));
  }

  private cumAt(seq: number): number {
    if (seq < this.firstRetainedSeq) return this.droppedCumBytes;
    if (seq > this.last) return this.cumBytes;
    if (seq < this.liveFirstSeq) return this.retained.cumAt(seq);
    return this.stored[this.head + (seq - this.liveFirstSeq)]!.cumBytes;
  }

  /** Bytes and age of the entries after `appliedSeq` (what the standby lags by). */
  lagAfter(appliedSeq: number, nowMs: number): { entries: number; bytes: number; seconds: number } {
    const entries = Math.max(0, this.last - appliedSeq);
    if (entries === 0) return { entries: 0, bytes: 0, seconds: 0 };
    const from = Math.max(appliedSeq + 1, this.firstRetainedSeq);
    const oldestMs =
      from < this.liveFirstSeq
        ? this.retained.appendedMsAt(from)
        : this.stored[this.head + (from - this.liveFirstSeq)]?.appendedMs;
    return {
      entries,
      bytes: this.bytesBetween(appliedSeq, this.last),
      seconds: oldestMs === undefined ? 0 : (nowMs - oldestMs) / 1000,
    };
  }

  /**
   * Entries up to `seq` (applied by the standby, or of no use to anyone) are kept as bytes,
   * and the oldest dropped while they take more than `retainBytes` of heap.
   */
  release(seq: number, retainBytes: number): void {
    const limit = Math.min(seq, this.last);
    // Nothing to retain: the slabs go first (entries dropped below are newer than theirs).
    if (retainBytes <= 0) this.dropRetainedOver(0);
    while (this.head < this.stored.length && this.stored[this.head]!.entry.seq <= limit) {
      const s = this.stored[this.head++]!;
      if (retainBytes > 0) {
        this.retained.push(s.entry, s.bytes, s.cumBytes, s.appendedMs, retainBytes);
      } else {
        this.drop(s.cumBytes, s.bytes);
      }
    }
    this.dropRetainedOver(retainBytes);
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

  private dropRetainedOver(retainBytes: number): void {
    while (this.retained.count > 0 && this.retained.heapBytes > retainBytes) {
      const slab = this.retained.dropOldest();
      this.drop(slab.cum, slab.bytes);
    }
  }

  private drop(cumBytes: number, bytes: number): void {
    this.bytesHeld -= bytes;
    this.droppedCumBytes = cumBytes;
  }
}
