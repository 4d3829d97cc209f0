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
// each callback it queues (a native function passed alone). The wrapper runs those at most once
// per `intervalUs`; between runs a single reused JavaScript callback waits its turn instead,
// which makes no native function. Every callback Dawn queued still runs, in order (its runner
// queues no other turn until its callback has run: dropping one would stop its polling).
import { seqTraceOn, traceSeq } from "@vgpu-ha/common";

/** Dawn's event polls traced (BENCH_SEQ_TRACE) once per this many, as `dawn.polls`. */
const TRACE_POLLS_EVERY = 10_000;

type Callback = () => void;

/**
 * Runs the callbacks it is given at most once per interval, all those queued since the last
 * run, in order. The clock (ms) and the scheduler (setImmediate's own) are injected.
 */
export class EventPacer {
  intervalMs: number;
  private readonly now: () => number;
  private readonly schedule: (run: Callback) => void;
  private queued: Callback[] = [];
  private scheduled = false;
  private lastRunMs = Number.NEGATIVE_INFINITY;
  /** Callbacks taken so far. */
  taken = 0;

  constructor(intervalMs: number, now: () => number, schedule: (run: Callback) => void) {
    this.intervalMs = intervalMs;
    this.now = now;
    this.schedule = schedule;
  }

  /** Queues `callback` to run at the next paced turn. */
  offer(callback: Callback): void {
    this.taken++;
    if (seqTraceOn && this.taken % TRACE_POLLS_EVERY === 0) traceSeq("dawn.polls", this.taken);
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
    if (now - this.lastRunMs < this.intervalMs) {
      this.scheduled = true;
      this.schedule(this.run);
      return;
    }
    this.lastRunMs = now;
    const due = this.queued;
    this.queued = [];
    for (let i = 0; i < due.length; i++) {
      try {
        due[i]!();
      } catch (e) {
        // What did not run yet goes first at the next turn; the error is setImmediate's to tell.
        this.queued = [...due.slice(i + 1), ...this.queued];
        if (!this.scheduled && this.queued.length > 0) {
          this.scheduled = true;
          this.schedule(this.run);
        }
        throw e;
      }
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

/**
 * Paces Dawn's event polls in this process to at most one per `intervalUs` (0: each turn, as
 * Dawn does). Installed once, on the global setImmediate; a later call changes the interval.
 */
export function paceDawnEvents(intervalUs: number): void {
  if (pacer !== undefined) {
    pacer.intervalMs = intervalUs / 1000;
    return;
  }
  const original = globalThis.setImmediate as (callback: Callback, ...args: unknown[]) => unknown;
  const schedule = (run: Callback) => {
    original(run);
  };
  const installed = new EventPacer(intervalUs / 1000, () => performance.now(), schedule);
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
