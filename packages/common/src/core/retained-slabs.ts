// The applied entries the primary's log retains (so a standby that reconnects can resume),
// kept as their packed bytes (wire/entry-pack.ts, the body encoding of the replication stream)
// in a few large slabs rather than as one object graph per entry: ~40 B of heap for a small
// call instead of ~600 B, and almost nothing for the garbage collector to trace. Each slab
// keeps its names (session ids, tenants, kernel names) beside its bytes, and per entry its end
// offset, cumulative wire bytes and append time in typed arrays (16 B). Entries are decoded again
// only when read (a resume). heapBytes is what the slabs really hold: their capacities.
// An entry the encoding cannot hold exactly (a value out of its range: a negative offset, a
// non-float32 argument — which no entry decoded from the wire has, but a simulator's may) is
// kept as its object, counted at an object's cost.

import { packBody, unpackBody } from "../wire/entry-pack.js";
import { type Names, NameTable, PackReader, PackWriter } from "../wire/packed-bytes.js";
import type { Entry } from "./entries.js";
import { invariant } from "./errors.js";

/** Bounds of one slab's byte capacity (retainBytes / SLABS_PER_BUDGET between them). */
const SLAB_BYTES_MIN = 4 * 1024;
const SLAB_BYTES_MAX = 1024 * 1024;
/**
 * A slab's bytes are at most this share of retainBytes (its index adds about as much for small
 * entries), so dropping a whole one keeps most of the budget.
 */
const SLABS_PER_BUDGET = 16;
/** Entries a slab's index starts with (it doubles). */
const INDEX_ENTRIES_MIN = 64;
/** Heap of a slab's objects besides its arrays, and of a name besides its characters. */
const SLAB_OVERHEAD_BYTES = 512;
const NAME_OVERHEAD_BYTES = 48;
/** An entry's index: its end (4 B), cumulative wire bytes (4 B), append time (8 B). */
const INDEX_ENTRY_BYTES = 16;
/** Heap of an entry kept as its object (measured ~600 B for a small call), payload aside. */
const OBJECT_ENTRY_HEAP_BYTES = 640;

class Slab {
  readonly firstSeq: number;
  count = 0;
  buf: Uint8Array;
  used = 0;
  /**
   * Per entry: the end of its bytes, the log's wire bytes up to it less baseCum, its append
   * time. Trimmed to the entries when the slab is sealed.
   */
  ends: Uint32Array;
  cums: Uint32Array;
  appendedMs: Float64Array;
  /** The wire bytes of the log before this slab's first entry. */
  readonly baseCum: number;
  readonly names: Names = { list: [], bytes: 0 };
  /** The encoder's side of `names`, while the slab takes entries. */
  table: NameTable | undefined = new NameTable();
  /** Entries kept as objects (no bytes: an empty range), by index in the slab. */
  objects: Map<number, Entry> | undefined;
  /** The heap the slab holds: its arrays' capacities, its names and objects (kept up to date). */
  heapBytes: number;

  constructor(firstSeq: number, baseCum: number, capacityBytes: number) {
    this.firstSeq = firstSeq;
    this.baseCum = baseCum;
    this.buf = new Uint8Array(capacityBytes);
    this.ends = new Uint32Array(INDEX_ENTRIES_MIN);
    this.cums = new Uint32Array(INDEX_ENTRIES_MIN);
    this.appendedMs = new Float64Array(INDEX_ENTRIES_MIN);
    this.heapBytes = SLAB_OVERHEAD_BYTES + capacityBytes + INDEX_ENTRIES_MIN * INDEX_ENTRY_BYTES;
  }

  get lastSeq(): number {
    return this.firstSeq + this.count - 1;
  }

  /** The index arrays with room for `n` entries. */
  resizeIndex(n: number): void {
    this.heapBytes += (n - this.ends.length) * INDEX_ENTRY_BYTES;
    const resize = <T extends Uint32Array | Float64Array>(a: T, make: (n: number) => T): T => {
      const b = make(n);
      b.set(a.subarray(0, this.count));
      return b;
    };
    this.ends = resize(this.ends, (k) => new Uint32Array(k));
    this.cums = resize(this.cums, (k) => new Uint32Array(k));
    this.appendedMs = resize(this.appendedMs, (k) => new Float64Array(k));
  }

  /** Takes no more entries: the encoder's table goes, the index shrinks to the entries. */
  seal(): void {
    this.table = undefined;
    if (this.ends.length > this.count) this.resizeIndex(this.count);
  }

  /** The names `table` took since the last call join the decoder's list. */
  syncNames(): void {
    const table = this.table!;
    const list = this.names.list;
    if (table.size === list.length) return;
    for (const [name, i] of table.index) {
      if (i < list.length) continue;
      list[i] = name;
      this.heapBytes += NAME_OVERHEAD_BYTES + 2 * name.length;
    }
  }
}

export class RetainedSlabs {
  private slabs: Slab[] = [];
  private readonly writer = new PackWriter();
  private heap = 0;

  /** Entries held; they run from firstSeq to lastSeq without a gap. */
  get count(): number {
    const first = this.firstSeq;
    return first === undefined ? 0 : this.lastSeq! - first + 1;
  }

  get firstSeq(): number | undefined {
    return this.slabs[0]?.firstSeq;
  }

  get lastSeq(): number | undefined {
    return this.slabs.at(-1)?.lastSeq;
  }

  /** The heap the slabs hold (their capacities), what retainBytes bounds. */
  get heapBytes(): number {
    return this.heap;
  }

  /**
   * Keeps `entry`, the one after lastSeq, as its bytes; `cum` is the log's wire bytes up to and
   * including it (`bytes` its own). New slabs take retainBytes / 8 (4 KiB – 1 MiB).
   */
  push(entry: Entry, bytes: number, cum: number, appendedMs: number, retainBytes: number): void {
    const last = this.lastSeq;
    if (last !== undefined && entry.seq !== last + 1) {
      invariant(false, `retained ${entry.seq} after ${last}`);
    }
    const w = this.writer;
    const current = this.slabs.at(-1);
    if (current?.table !== undefined) {
      if (!this.pack(current.table, entry)) {
        this.placeObject(current, entry, bytes, cum, appendedMs);
        return;
      }
      if (current.used + w.length <= current.buf.length) {
        this.place(current, w, cum, appendedMs);
        return;
      }
      const before = current.heapBytes;
      current.seal();
      this.heap += current.heapBytes - before;
    }
    const size = Math.min(SLAB_BYTES_MAX, Math.max(SLAB_BYTES_MIN, retainBytes / SLABS_PER_BUDGET));
    const slab = new Slab(entry.seq, cum - bytes, Math.ceil(size));
    this.slabs.push(slab);
    this.heap += slab.heapBytes;
    if (this.pack(slab.table!, entry)) this.place(slab, w, cum, appendedMs);
    else this.placeObject(slab, entry, bytes, cum, appendedMs);
  }

  /** The entry's body into the writer; false when the encoding cannot hold it exactly. */
  private pack(table: NameTable, entry: Entry): boolean {
    this.writer.begin();
    try {
      packBody(this.writer, table, false, entry.body);
      return true;
    } catch (e) {
      if (e instanceof RangeError) return false;
      throw e;
    }
  }

  private placeObject(slab: Slab, entry: Entry, bytes: number, cum: number, ms: number): void {
    const before = slab.heapBytes;
    slab.objects ??= new Map();
    slab.objects.set(slab.count, entry);
    slab.heapBytes += OBJECT_ENTRY_HEAP_BYTES + bytes;
    this.index(slab, slab.used, cum, ms);
    this.heap += slab.heapBytes - before;
  }

  private index(slab: Slab, end: number, cum: number, appendedMs: number): void {
    if (slab.count === slab.ends.length) slab.resizeIndex(2 * slab.count);
    slab.ends[slab.count] = end;
    slab.cums[slab.count] = cum - slab.baseCum;
    slab.appendedMs[slab.count] = appendedMs;
    slab.count++;
  }

  private place(slab: Slab, w: PackWriter, cum: number, appendedMs: number): void {
    const before = slab.heapBytes;
    const end = slab.used + w.length;
    if (end > slab.buf.length) {
      // A single entry larger than a slab: the slab is made its size.
      const grown = new Uint8Array(end);
      grown.set(slab.buf.subarray(0, slab.used));
      slab.heapBytes += end - slab.buf.length;
      slab.buf = grown;
    }
    w.copyTo(slab.buf, slab.used);
    slab.used = end;
    this.index(slab, end, cum, appendedMs);
    slab.syncNames();
    this.heap += slab.heapBytes - before;
  }

  private find(seq: number): { slab: Slab; i: number } {
    const slabs = this.slabs;
    let lo = 0;
    let hi = slabs.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (slabs[mid]!.firstSeq <= seq) lo = mid;
      else hi = mid - 1;
    }
    const slab = slabs[lo];
    invariant(slab && seq >= slab.firstSeq && seq <= slab.lastSeq, `retained seq ${seq}`);
    return { slab, i: seq - slab.firstSeq };
  }

  /** Entry `seq` (held), decoded from its bytes. */
  entryAt(seq: number): Entry {
    const { slab, i } = this.find(seq);
    const start = i === 0 ? 0 : slab.ends[i - 1]!;
    if (start === slab.ends[i]) return slab.objects!.get(i)!;
    const reader = new PackReader(slab.buf, slab.names, start, slab.ends[i]!);
    const body = unpackBody(reader, seq);
    invariant(reader.done, `retained entry ${seq} decoded short`);
    return { seq, body };
  }

  /** The log's wire bytes up to and including entry `seq` (held). */
  cumAt(seq: number): number {
    const { slab, i } = this.find(seq);
    return slab.baseCum + slab.cums[i]!;
  }

  /** Entry `seq`'s own wire bytes (held). */
  bytesAt(seq: number): number {
    const { slab, i } = this.find(seq);
    return slab.cums[i]! - (i === 0 ? 0 : slab.cums[i - 1]!);
  }

  appendedMsAt(seq: number): number {
    const { slab, i } = this.find(seq);
    return slab.appendedMs[i]!;
  }

  /** Drops the oldest slab; its last seq and the log's wire bytes up to it. */
  dropOldest(): { lastSeq: number; cum: number; bytes: number } {
    const slab = this.slabs.shift();
    invariant(slab !== undefined, "no retained slab to drop");
    this.heap -= slab.heapBytes;
    const bytes = slab.count > 0 ? slab.cums[slab.count - 1]! : 0;
    return { lastSeq: slab.lastSeq, cum: slab.baseCum + bytes, bytes };
  }
}
