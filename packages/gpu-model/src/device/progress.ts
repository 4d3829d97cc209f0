// How the rest of a node follows its device (issue #14, the asynchronous device). The
// paravirtual layer (Backend) stays synchronous: it validates, assigns handles and decides
// every call's code at once, on the main thread. The work on VRAM bytes (DMA, copies, kernels,
// stores, page batches, snapshot reads, hashing) is queued to the device, which runs it later,
// in order. Consumers never read VRAM-derived values (a dmaRead's data, a digest) before the
// device says the work that produces them is done.
//
// Log entries and device work are tied by seq: before applying an entry (the primary's
// sequencer, the standby's applier) the caller says which seq the work it is about to submit
// belongs to; the device then reports the highest seq whose work is complete.

/** The device could not finish its work: it exceeded device.maxCallMs, or its thread died. */
export interface DeviceFailure {
  readonly reason: string;
  /** The seq of the entry whose work was running (0: none known). */
  readonly seq: number;
}

export interface DeviceProgress {
  /** Work submitted from now on belongs to log entry `seq` (non-decreasing). */
  beginSeq(seq: number): void;
  /**
   * The highest seq, at most `lastSeq`, such that the work of every entry up to it is
   * complete. With nothing outstanding, `lastSeq` itself.
   */
  doneSeq(lastSeq: number): number;
  /** Calls `listener` (on the main thread) after device work completes; returns an unsubscribe. */
  onProgress(listener: () => void): () => void;
  /**
   * Calls `callback` once every piece of work submitted so far is complete. May call it before
   * returning (a synchronous device): callers must allow that.
   */
  afterDevice(callback: () => void): void;
  /** Set once the device failed; it then completes nothing more. */
  readonly failure: DeviceFailure | undefined;
  /** Calls `listener` once, when the device fails; returns an unsubscribe. */
  onFailure(listener: (failure: DeviceFailure) => void): () => void;
}

/**
 * The device as it runs today: inline on the caller's thread, every piece of work complete
 * when submitted. Kept for tests and tools; a node runs the device on its own thread.
 */
export class InlineProgress implements DeviceProgress {
  beginSeq(_seq: number): void {}
  doneSeq(lastSeq: number): number {
    return lastSeq;
  }
  onProgress(_listener: () => void): () => void {
    return () => {};
  }
  afterDevice(callback: () => void): void {
    callback();
  }
  readonly failure: DeviceFailure | undefined = undefined;
  onFailure(_listener: (failure: DeviceFailure) => void): () => void {
    return () => {};
  }
}
