// Paces Dawn's event polling (issue #17, the sync pair's stalls). dawn.node (npm `webgpu`
// 0.6.2) notices GPU completions only while a promise of its own is pending: its AsyncRunner
// calls wgpuInstanceProcessEvents from a setImmediate callback that queues itself again, once
// per event-loop turn, and it makes a new native function for every turn (upstream's TODO
// "Create once, reuse", crbug.com/dawn/1127). On a gemm-bound node that is hundreds of
// thousands of native functions a second, each with a V8 template in old space and a weak
// finalizer: the seq trace (bench/seq-trace.ts) showed a mark-compact every ~145 ms on such a
// node and, every few seconds, one of 40–67 ms followed by as long again before the loop
// turned — the stalls of a sync pair, where either node's pause holds the launch.
//
// Dawn looks `setImmediate` up on the global object at every turn, so a wrapper put there sees
// each callback it queues (a native function passed alone). The wrapper runs those at paced
// intervals — short at first, so a small call is noticed as soon as before, then doubling up to
// device.webgpu.eventIntervalUs while the wait goes on; between runs a single reused JavaScript
// callback waits its turn instead, which makes no native function. Every callback Dawn queued
// still runs, in order (its runner queues no other poll until its callback has run: dropping
// one would stop its polling for good).
import { seqTraceOn, traceSeq } from "@vgpu-ha/common";

/** Dawn's event polls traced (BENCH_SEQ_TRACE) once per this many, as `dawn.polls`. */
const TRACE_POLLS_EVERY = 10_000;
/** The first interval of a chain of polls (a small call is noticed within a few of these). */
export const FIRST_INTERVAL_US = 10;

type Callback = () => void;

/**
 * Runs the callbacks it is given, all those queued since its last run, in order, no sooner than
 * an interval after that run. A chain of polls (begun by a callback offered while none is
 * queued or running: Dawn had nothing pending before) runs its first at the next turn, then
 * after FIRST_INTERVAL_US, doubling at each run up to `maxMs`: a short wait is noticed at once,
 * a long one (a gemm-bound node, whose chain never ends) is polled every `maxMs`. The clock
 * (ms) and the scheduler (setImmediate's own) are injected.
 */
export class EventPacer {
  private firstMs: number;
  private maxMs: number;
  private readonly now: () => number;
  private readonly schedule: (run: Callback) => void;
  private queued: Callback[] = [];
  private scheduled = false;
  private running = false;
  /** The wait before the next run, and the one after it. */
  private waitMs = 0;
  private nextWaitMs: number;
  private lastRunMs = Number.NEGATIVE_INFINITY;
  /** Callbacks taken so far, and chains of polls begun. */
  taken = 0;
  chains = 0;

  constructor(maxMs: number, now: () => number, schedule: (run: Callback) => void) {
    this.maxMs = maxMs;
    this.firstMs = Math.min(maxMs, FIRST_INTERVAL_US / 1000);
    this.nextWaitMs = this.firstMs;
    this.now = now;
    this.schedule = schedule;
  }

  /** Changes the longest interval (paceDawnEvents called again). */
  setMaxMs(maxMs: number): void {
    this.maxMs = maxMs;
    this.firstMs = Math.min(maxMs, FIRST_INTERVAL_US / 1000);
    this.waitMs = Math.min(this.waitMs, maxMs);
    this.nextWaitMs = Math.min(this.nextWaitMs, maxMs);
  }

  /** Queues `callback` for the next paced run. */
  offer(callback: Callback): void {
    this.taken++;
    if (seqTraceOn && this.taken % TRACE_POLLS_EVERY === 0) traceSeq("dawn.polls", this.taken);
    if (!this.running && !this.scheduled && this.queued.length === 0) {
      // A new chain: its first poll at the next turn, then FIRST_INTERVAL_US, doubling.
      this.waitMs = 0;
      this.nextWaitMs = this.firstMs;
      this.chains++;
    }
    this.queued.push(callback);
    if (!this.scheduled) {
      this.scheduled = true;
      this.schedule(this.run);
    }
  }

  private readonly run = (): void => {
    this.scheduled = false;
    if (this.queued.length === 0) return;
    const now = this.now();
    if (now - this.lastRunMs < this.waitMs) {
      this.scheduled = true;
      this.schedule(this.run);
      return;
    }
    this.lastRunMs = now;
    this.waitMs = this.nextWaitMs;
    this.nextWaitMs = Math.min(this.maxMs, this.nextWaitMs * 2);
    const due = this.queued;
    this.queued = [];
    this.running = true;
    let i = 0;
    try {
      for (; i < due.length; i++) due[i]!();
    } catch (e) {
      // What did not run yet goes first at the next run; the error is setImmediate's to tell.
      this.queued = [...due.slice(i + 1), ...this.queued];
      if (!this.scheduled && this.queued.length > 0) {
        this.scheduled = true;
        this.schedule(this.run);
      }
      throw e;
    } finally {
      this.running = false;
    }
  };
}

const toSource = Function.prototype.toString;

/** Whether setImmediate's arguments are a callback of a native module's (Dawn's), alone. */
export function isNativeCallback(callback: unknown, extraArgs: number): boolean {
  if (extraArgs !== 0 || typeof callback !== "function" || callback.name !== "") return false;
  // Arrow functions have no prototype; a JavaScript function's source never ends so.
  return (
    Object.hasOwn(callback, "prototype") && toSource.call(callback).endsWith("[native code] }")
  );
}

let pacer: EventPacer | undefined;

/** Dawn's polls and chains of polls in this process so far (undefined: not paced). */
export function dawnPollStats(): { polls: number; chains: number } | undefined {
  return pacer && { polls: pacer.taken, chains: pacer.chains };
}

/**
 * Paces Dawn's event polls in this process: within a chain of polls, intervals from
 * FIRST_INTERVAL_US doubling up to `maxIntervalUs` (0: every turn, as Dawn does). Installed
 * once, on the global setImmediate; a later call changes the longest interval.
 */
export function paceDawnEvents(maxIntervalUs: number): void {
  if (pacer !== undefined) {
    pacer.setMaxMs(maxIntervalUs / 1000);
    return;
  }
  const original = globalThis.setImmediate as (callback: Callback, ...args: unknown[]) => unknown;
  const schedule = (run: Callback) => {
    original(run);
  };
  const installed = new EventPacer(maxIntervalUs / 1000, () => performance.now(), schedule);
  pacer = installed;
  const paced = function setImmediate(callback: Callback, ...args: unknown[]) {
    if (isNativeCallback(callback, args.length)) {
      installed.offer(callback);
      return undefined;
    }
    return original(callback, ...args);
  };
  // util.promisify's custom form (a symbol-keyed property) stays available.
  for (const key of Object.getOwnPropertySymbols(original)) {
    Object.defineProperty(paced, key, Object.getOwnPropertyDescriptor(original, key)!);
  }
  globalThis.setImmediate = paced as typeof setImmediate;
}
