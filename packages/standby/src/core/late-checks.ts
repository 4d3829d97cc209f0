// The standby's comparisons of results that need the device (issue #14: entries leave before
// they execute). A dmaRead's output digest and a checkpoint's state digest are known on each
// node only once its own device has run the entry: the primary's come later as late results,
// ours from our device's completion. Whichever comes second settles the comparison. Pure.
import type { CheckpointResult, LateResult } from "@vgpu-ha/common/core";

/** What an entry waits for: a call's output digest, or a checkpoint's state digest. */
export type Expected =
  | { readonly kind: "output"; readonly what: string }
  | { readonly kind: "checkpoint"; readonly requestId: number };

/** A settled comparison: a checkpoint's outcome to acknowledge, and/or a divergence. */
export interface LateOutcome {
  readonly seq: number;
  readonly checkpoint?: CheckpointResult;
  readonly divergence?: string;
}

interface Waiting {
  readonly expected: Expected;
  mine?: LateResult;
  theirs?: LateResult;
}

/**
 * The primary's late results for entries this replica has not expected (yet) are kept up to
 * this many: a late result normally follows its entry, so the bound only stops a faulty
 * primary from growing the map.
 */
const UNEXPECTED_MAX = 4096;

export class LateChecks {
  private readonly waiting = new Map<number, Waiting>();
  private readonly early = new Map<number, LateResult>();

  /** Comparisons still open (for tests and status). */
  get open(): number {
    return this.waiting.size;
  }

  /** Entry `seq` was applied and its result needs both sides' devices. */
  expect(seq: number, expected: Expected): void {
    const w: Waiting = { expected };
    const early = this.early.get(seq);
    if (early !== undefined) {
      this.early.delete(seq);
      w.theirs = early;
    }
    this.waiting.set(seq, w);
  }

  /** Our device produced entry `seq`'s result. */
  mine(r: LateResult): LateOutcome | undefined {
    const w = this.waiting.get(r.seq);
    if (w === undefined) return undefined;
    w.mine = r;
    return this.settle(r.seq, w);
  }

  /**
   * The primary's result for entry `seq`. One for an entry up to `receivedSeq` that waits for
   * nothing is a copy (resent after a broken link): dropped.
   */
  theirs(r: LateResult, receivedSeq: number): LateOutcome | undefined {
    const w = this.waiting.get(r.seq);
    if (w === undefined) {
      if (r.seq > receivedSeq && this.early.size < UNEXPECTED_MAX) this.early.set(r.seq, r);
      return undefined;
    }
    w.theirs = r;
    return this.settle(r.seq, w);
  }

  /**
   * The link broke: the primary resends late results only after the applied seq it is told,
   * so those of entries up to it that did not arrive never will: their checks are dropped.
   * Returns how many.
   */
  dropUpTo(appliedSeq: number): number {
    let dropped = 0;
    for (const [seq, w] of this.waiting) {
      if (seq <= appliedSeq && w.theirs === undefined) {
        this.waiting.delete(seq);
        dropped++;
      }
    }
    return dropped;
  }

  /** The state they were about is gone (a snapshot replaced it, or it diverged). */
  clear(): void {
    this.waiting.clear();
    this.early.clear();
  }

  private settle(seq: number, w: Waiting): LateOutcome | undefined {
    const { mine, theirs, expected } = w;
    if (mine === undefined || theirs === undefined) return undefined;
    this.waiting.delete(seq);
    if (expected.kind === "checkpoint") {
      const digest = mine.kind === "state" ? mine.digest : "";
      const equal = theirs.kind === "state" && theirs.digest === digest;
      const checkpoint = { requestId: expected.requestId, seq, equal, digest };
      return equal
        ? { seq, checkpoint }
        : { seq, checkpoint, divergence: `digest ${digest} differs at checkpoint` };
    }
    if (theirs.kind !== "output" || mine.kind !== "output") {
      return { seq, divergence: `${expected.what}: the primary's late result is not an output` };
    }
    if (Buffer.from(mine.outputDigest).equals(Buffer.from(theirs.outputDigest))) return { seq };
    return { seq, divergence: `${expected.what}: output differs from the primary's` };
  }
}
