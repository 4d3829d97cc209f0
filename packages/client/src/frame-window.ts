// The frames of a session that are queued or in flight, in frame-number order, each with the
// promise of its result. Results arrive in frame order, so this is a queue: settled frames
// leave from the head. Sent-but-unacknowledged frames are bounded by the session. A frame's
// result goes to its promise (push) or to a callback (add: no promise, for drivers that run in
// simulated time).
import type { CallResult, Frame } from "@vgpu-ha/common";

export interface PendingFrame {
  readonly frame: Frame;
  /** Told the frame's result, or the error that failed it. */
  readonly done: (outcome: CallResult | Error) => void;
}

export class FrameWindow {
  private frames: PendingFrame[] = [];
  /** Index of the oldest unsettled frame. */
  private head = 0;
  /** Index of the first frame not yet sent. */
  private firstUnsent = 0;
  private nextNumber: number;
  /** settled() callers: each waits until this frame number has settled. */
  private waiters: { readonly through: number; readonly wake: () => void }[] = [];

  constructor(lastApplied: number) {
    this.nextNumber = lastApplied + 1;
  }

  /** Frames not yet settled (queued or in flight). */
  get size(): number {
    return this.frames.length - this.head;
  }

  /** The highest frame number whose result was delivered (0 when none). */
  get settledThrough(): number {
    const oldest = this.frames[this.head];
    return oldest ? oldest.frame.number - 1 : this.nextNumber - 1;
  }

  /** Frames sent and not yet settled. */
  get inFlight(): number {
    return this.firstUnsent - this.head;
  }

  /** Queues a frame; its result resolves the promise (a failure rejects it). */
  push(body: Frame["body"]): Promise<CallResult> {
    return new Promise<CallResult>((resolve, reject) => {
      this.add(body, (outcome) => (outcome instanceof Error ? reject(outcome) : resolve(outcome)));
    });
  }

  /** Queues a frame; `done` is told its result or failure. Its number. */
  add(body: Frame["body"], done: (outcome: CallResult | Error) => void = () => undefined): number {
    const frame: Frame = { number: this.nextNumber++, body };
    this.frames.push({ frame, done });
    return frame.number;
  }

  /** Resolves when every frame pushed so far has settled (whatever its outcome). */
  settled(): Promise<void> {
    const through = this.nextNumber - 1;
    if (this.size === 0 || this.settledThrough >= through) return Promise.resolve();
    return new Promise((wake) => this.waiters.push({ through, wake }));
  }

  /**
   * Up to `max` unsent frames, now counted as sent; with a byte budget, stops before the frame
   * that would exceed it (but always takes at least one).
   */
  takeUnsent(
    max: number,
    budgetBytes = Number.POSITIVE_INFINITY,
    sizeOf: (body: Frame["body"]) => number = () => 0,
  ): Frame[] {
    const end = Math.min(this.frames.length, this.firstUnsent + max);
    const out: Frame[] = [];
    let bytes = 0;
    for (let i = this.firstUnsent; i < end; i++) {
      const frame = this.frames[i]!.frame;
      bytes += sizeOf(frame.body);
      if (out.length > 0 && bytes > budgetBytes) break;
      out.push(frame);
    }
    this.firstUnsent += out.length;
    return out;
  }

  /** The result of frame `number`: settles it and every older frame must already be settled. */
  settle(number: number, result: CallResult): void {
    const p = this.frames[this.head];
    if (p === undefined || p.frame.number !== number) return; // not ours (duplicate reply)
    this.head++;
    if (this.firstUnsent < this.head) this.firstUnsent = this.head;
    this.compact();
    p.done(result);
    this.wake();
  }

  /** Marks every unsettled frame unsent again (to re-send after a resume). */
  rewind(): void {
    this.firstUnsent = this.head;
  }

  failAll(error: Error): void {
    const rest = this.frames.slice(this.head);
    this.frames = [];
    this.head = 0;
    this.firstUnsent = 0;
    for (const p of rest) p.done(error);
    this.wake();
  }

  private wake(): void {
    if (this.waiters.length === 0) return;
    const settled = this.size === 0 ? Number.POSITIVE_INFINITY : this.settledThrough;
    const due = this.waiters.filter((w) => w.through <= settled);
    if (due.length === 0) return;
    this.waiters = this.waiters.filter((w) => w.through > settled);
    for (const w of due) w.wake();
  }

  private compact(): void {
    if (this.head >= 1024 && this.head * 2 >= this.frames.length) {
      this.frames = this.frames.slice(this.head);
      this.firstUnsent -= this.head;
      this.head = 0;
    }
  }
}
