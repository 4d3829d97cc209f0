// Touches a fresh replica's VRAM ahead of the device thread's writes (issue #15). A buffer's
// memory is a SharedArrayBuffer the kernel maps page by page on first touch: writing a pulled
// snapshot's pages into fresh memory costs the device thread a page fault (and the kernel's
// zeroing) per 4 KiB, about four times the copy itself. A helper thread started when chunk 0
// has restored the buffers touches every page first, in the order the snapshot sends them, so
// the faults are paid on that thread instead.
//
// Why it never changes a byte: each touch is `Atomics.compareExchange(view, i, 0, 0)`, a
// locked compare-and-swap that writes 0 only where it read 0, atomically. Any store of the
// device thread (or of the main thread's small inline writes) to that word lands either before
// it, and then the word is not 0 (nothing written) or is 0 and stays 0, or after it, and
// overwrites it. A plain store of 0 would erase what was written meanwhile. The toucher writes
// nothing else. Not `Atomics.add(view, i, 0)`, which is as safe: V8 runs it as a load and then a
// compare-and-swap, and the load maps the kernel's shared zero page first, so each page took
// two faults instead of one (counted: 2.00 against 1.00 minor faults per page).
import { Worker } from "node:worker_threads";
import { PAGE_SIZE_BYTES } from "../device/vram.js";

const WORDS_PER_PAGE = PAGE_SIZE_BYTES / 4;
/** Pages touched between two looks at the stop flag (256 KiB). */
const STOP_CHECK_PAGES = 64;

/** What the toucher thread is given: the buffers, in order, and a flag set to stop it. */
export interface TouchWork {
  readonly buffers: readonly SharedArrayBuffer[];
  /** Int32 word 0: set to 1 to stop. */
  readonly stop: SharedArrayBuffer;
}

/**
 * Touches each 4 KiB page of each buffer once, in order, with a compare-and-swap of 0 for 0
 * on its first word; stops early
 * once `stop` word 0 is non-zero. Returns the pages touched. `onPage` sees each page touched
 * (tests).
 */
export function touchPages(
  work: TouchWork,
  onPage?: (buffer: number, page: number) => void,
): number {
  const stop = new Int32Array(work.stop);
  let touched = 0;
  for (let b = 0; b < work.buffers.length; b++) {
    const words = new Int32Array(work.buffers[b]!);
    const pages = Math.ceil(words.length / WORDS_PER_PAGE);
    for (let p = 0; p < pages; p++) {
      if (p % STOP_CHECK_PAGES === 0 && Atomics.load(stop, 0) !== 0) return touched;
      Atomics.compareExchange(words, p * WORDS_PER_PAGE, 0, 0);
      onPage?.(b, p);
      touched++;
    }
  }
  return touched;
}

/** The worker's entry: always the built JS (under vitest this module runs from src/). */
function toucherWorkerUrl(): URL {
  const url = new URL("./page-toucher-worker.js", import.meta.url);
  return new URL(url.href.replace("/src/worker/", "/dist/worker/"));
}

/** A thread touching the given buffers' pages once (touchPages), then ending. */
export class PageToucher {
  private readonly stopFlag = new Int32Array(new SharedArrayBuffer(4));
  private readonly worker: Worker;
  /** The pages touched, once the thread ended (fewer when stopped; 0 if it failed). */
  readonly done: Promise<number>;

  constructor(buffers: readonly SharedArrayBuffer[]) {
    const work: TouchWork = { buffers, stop: this.stopFlag.buffer as SharedArrayBuffer };
    this.worker = new Worker(toucherWorkerUrl(), { workerData: work });
    // Never what keeps a process alive: a closing node does not wait for it.
    this.worker.unref();
    let touched = 0;
    this.worker.once("message", (n: number) => {
      touched = n;
    });
    // A failed toucher costs speed only (the device thread then pays the faults itself).
    this.worker.on("error", () => {});
    this.done = new Promise((resolve) => this.worker.once("exit", () => resolve(touched)));
  }

  /** Stops touching (the thread ends within STOP_CHECK_PAGES pages); the buffers stay as they are. */
  stop(): void {
    Atomics.store(this.stopFlag, 0, 1);
  }
}
