// The frames of a session that are queued or in flight, in frame-number order, each with the
// promise of its result. Results arrive in frame order, so this is a queue: settled frames
// leave from the head. Sent-but-unacknowledged frames are bounded by the session.
import type { CallResult, Frame } from "@vgpu-ha/common";

export interface PendingFrame {
  readonly frame: Frame;
  readonly done: Promise<CallResult>;
  resolve(result: CallResult): void;
  reject(error: Error): void;
}

export class FrameWindow {
  private frames: PendingFrame[] = [];
  /** Index of the oldest unsettled frame. */
  private head = 0;
  /** Index of the first frame not yet sent. */
  private firstUnsent = 0;
  private nextNumber: number;

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

  push(body: Frame["body"]): Promise<CallResult> {
    const frame: Frame = { number: this.nextNumber++, body };
    let resolve!: (r: CallResult) => void;
    let reject!: (e: Error) => void;
    const done = new Promise<CallResult>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    this.frames.push({ frame, done, resolve, reject });
    return done;
  }

  /** Resolves when every frame pushed so far has settled (whatever its outcome). */
  async settled(): Promise<void> {
    const last = this.frames.at(-1);
    if (last && this.size > 0) await last.done.catch(() => undefined);
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
    p.resolve(result);
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
    for (const p of rest) p.reject(error);
  }

  private compact(): void {
    if (this.head >= 1024 && this.head * 2 >= this.frames.length) {
      this.frames = this.frames.slice(this.head);
      this.firstUnsent -= this.head;
      this.head = 0;
    }
  }
}
