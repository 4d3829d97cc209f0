// A session's cached replies, oldest frame first, evicted by frame number: a ring of (frame,
// reply) in increasing frame order. A session's frames are applied in order, so each reply
// remembered is for a frame above every cached one (or replaces a cached one): appending keeps
// the ring sorted, the oldest is at its head, and a lookup is an index (frames contiguous, the
// usual case) or a binary search (gaps, as a snapshot of an older build may carry). No Map, no
// deque: a Map used as a FIFO costs a set, a delete and rehashes per call.
import { type CallResult, invariant } from "@vgpu-ha/common/core";

const INITIAL_CAPACITY = 16;

export class ReplyCache implements Iterable<[number, CallResult]> {
  private frames: number[] = new Array(INITIAL_CAPACITY).fill(0);
  private results: (CallResult | undefined)[] = new Array(INITIAL_CAPACITY).fill(undefined);
  private mask = INITIAL_CAPACITY - 1;
  /** Ring index of the oldest. */
  private head = 0;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** The oldest cached frame; undefined when empty. */
  get oldestFrame(): number | undefined {
    return this.count === 0 ? undefined : this.frames[this.head];
  }

  /** The newest cached frame; undefined when empty. */
  get newestFrame(): number | undefined {
    return this.count === 0 ? undefined : this.frames[(this.head + this.count - 1) & this.mask];
  }

  get(frame: number): CallResult | undefined {
    const i = this.indexOf(frame);
    return i < 0 ? undefined : this.results[(this.head + i) & this.mask];
  }

  has(frame: number): boolean {
    return this.indexOf(frame) >= 0;
  }

  /** Caches `result` for `frame`, above every cached frame. */
  push(frame: number, result: CallResult): void {
    const newest = this.newestFrame;
    invariant(newest === undefined || frame > newest, `reply of frame ${frame} after ${newest}`);
    if (this.count === this.frames.length) this.grow();
    const at = (this.head + this.count) & this.mask;
    this.frames[at] = frame;
    this.results[at] = result;
    this.count++;
  }

  /** Replaces a cached frame's reply in place (its age unchanged); the previous reply. */
  replace(frame: number, result: CallResult): CallResult {
    const i = this.indexOf(frame);
    invariant(i >= 0, `frame ${frame} is not cached`);
    const at = (this.head + i) & this.mask;
    const previous = this.results[at]!;
    this.results[at] = result;
    return previous;
  }

  /** Drops the oldest reply and returns it. */
  shift(): CallResult {
    invariant(this.count > 0, "shift of an empty reply cache");
    const at = this.head;
    const result = this.results[at]!;
    this.results[at] = undefined;
    this.head = (at + 1) & this.mask;
    this.count--;
    return result;
  }

  /** Position of `frame` from the oldest (0), or -1. */
  private indexOf(frame: number): number {
    if (this.count === 0) return -1;
    const first = this.frames[this.head]!;
    const direct = frame - first;
    if (direct < 0 || frame > this.frames[(this.head + this.count - 1) & this.mask]!) return -1;
    if (direct < this.count && this.frames[(this.head + direct) & this.mask] === frame) {
      return direct;
    }
    let lo = 0;
    let hi = this.count - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const f = this.frames[(this.head + mid) & this.mask]!;
      if (f === frame) return mid;
      if (f < frame) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  private grow(): void {
    const capacity = this.frames.length * 2;
    const frames = new Array<number>(capacity).fill(0);
    const results = new Array<CallResult | undefined>(capacity).fill(undefined);
    for (let i = 0; i < this.count; i++) {
      const at = (this.head + i) & this.mask;
      frames[i] = this.frames[at]!;
      results[i] = this.results[at];
    }
    this.frames = frames;
    this.results = results;
    this.mask = capacity - 1;
    this.head = 0;
  }

  *keys(): IterableIterator<number> {
    for (let i = 0; i < this.count; i++) yield this.frames[(this.head + i) & this.mask]!;
  }

  *entries(): IterableIterator<[number, CallResult]> {
    for (let i = 0; i < this.count; i++) {
      const at = (this.head + i) & this.mask;
      yield [this.frames[at]!, this.results[at]!];
    }
  }

  [Symbol.iterator](): IterableIterator<[number, CallResult]> {
    return this.entries();
  }
}
