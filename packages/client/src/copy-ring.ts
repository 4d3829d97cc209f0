// The library's copies of the data each dmaWrite sends (Session.call copies it, so the caller may
// reuse its buffer at once), cut from one reused ring of memory instead of a new ArrayBuffer per
// call. Each new ArrayBuffer counts toward V8's young-generation external bytes, and every 32 MiB
// of them forces a scavenge ("external memory pressure"): garbage collection was the client's
// largest cost per 64 KiB write (docs/benchmarks.md, "DMA 64 KiB"). A copy lives until its
// frame is answered or failed; frames settle in the order they were sent, so copies are released
// oldest first, and the ring's free space is always one or two contiguous stretches. A copy that
// does not fit (the ring full of unanswered writes, or larger than the ring) is a buffer of its
// own, as before.
import { invariant } from "@vgpu-ha/common";

/** A copy held in the ring: where it starts and ends; OWN: a buffer of its own. */
type Held = { readonly at: number; readonly end: number } | typeof OWN;
const OWN = null;

export class CopyRing {
  private readonly capacityBytes: number;
  /** Allocated at the first copy that fits. */
  private memory: Uint8Array | undefined;
  /** Live copies, oldest first, from `head`. */
  private held: Held[] = [];
  private head = 0;
  /** Copies live in the ring (not OWN). */
  private inRing = 0;
  /** Where the oldest copy in the ring starts, and where the newest ends. */
  private start = 0;
  private end = 0;

  constructor(capacityBytes: number) {
    this.capacityBytes = capacityBytes;
  }

  /** Copies in use (in the ring or of their own). */
  get live(): number {
    return this.held.length - this.head;
  }

  /** A copy of `data` that stays unchanged until release() has released it. */
  copy(data: Uint8Array): Uint8Array {
    const n = data.byteLength;
    const at = n === 0 ? -1 : this.place(n);
    if (at < 0) {
      this.held.push(OWN);
      return data.slice();
    }
    this.memory ??= new Uint8Array(this.capacityBytes);
    this.memory.set(data, at);
    if (this.inRing === 0) this.start = at;
    this.end = at + n;
    this.inRing++;
    this.held.push({ at, end: at + n });
    return this.memory.subarray(at, at + n);
  }

  /** Releases the oldest live copy (its frame was answered or failed). */
  releaseOldest(): void {
    invariant(this.head < this.held.length, "copy ring: nothing to release");
    const released = this.held[this.head++];
    if (released !== OWN) this.inRing--;
    if (this.head > 64 && this.head * 2 > this.held.length) {
      this.held = this.held.slice(this.head);
      this.head = 0;
    }
    if (released === OWN) return;
    if (this.inRing === 0) {
      this.start = 0;
      this.end = 0;
      return;
    }
    this.start = this.oldestInRing().at;
  }

  /** Where `n` bytes fit, or -1. Copies are never split: a stretch too short is skipped. */
  private place(n: number): number {
    if (this.inRing === 0) return n <= this.capacityBytes ? 0 : -1;
    if (this.start < this.end) {
      // One stretch in use: room after it, else at the front before it.
      if (this.end + n <= this.capacityBytes) return this.end;
      return n <= this.start ? 0 : -1;
    }
    // Wrapped: the room is between the newest copy's end and the oldest's start.
    return this.end + n <= this.start ? this.end : -1;
  }

  private oldestInRing(): { at: number; end: number } {
    for (let i = this.head; i < this.held.length; i++) {
      const h = this.held[i];
      if (h !== OWN && h !== undefined) return h;
    }
    invariant(false, "copy ring: no copy in the ring");
  }
}
