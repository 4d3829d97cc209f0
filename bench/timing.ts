// Timing helpers shared by the benchmarks: repeat work for a wall-clock budget, and order
// statistics of samples. Benchmarks only; tests never time anything.
import { performance } from "node:perf_hooks";

export interface Repetitions {
  readonly reps: number;
  readonly seconds: number;
}

/** Runs `fn` at least `minReps` times and until `budgetSeconds` have passed. */
export function repeatFor(budgetSeconds: number, minReps: number, fn: () => void): Repetitions {
  const start = performance.now();
  let reps = 0;
  let elapsedMs = 0;
  while (reps < minReps || elapsedMs < budgetSeconds * 1000) {
    fn();
    reps++;
    elapsedMs = performance.now() - start;
  }
  return { reps, seconds: elapsedMs / 1000 };
}

/** Runs `fn` exactly `reps` times; the seconds taken. */
export function timeReps(reps: number, fn: () => void): number {
  const start = performance.now();
  for (let i = 0; i < reps; i++) fn();
  return (performance.now() - start) / 1000;
}

export function median(samples: readonly number[]): number {
  return percentile(samples, 50);
}

/** Nearest-rank percentile (p in 0..100) of unsorted samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export const sleepMs = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Lets queued I/O and timers run (one turn of the event loop). */
export const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));
