// Rounds that visit set-ups in rotating order (ABC, BCA, CAB, …), so load from elsewhere on the
// machine falls on every set-up alike; and the median of per-round ratios between two set-ups
// (each round's pair measured one after the other).
import { median } from "./timing.js";

/** Round r visits the set-ups starting at r mod their number. */
export const rotation = <K>(keys: readonly K[], round: number): K[] =>
  keys.map((_, i) => keys[(round + i) % keys.length]!);

/**
 * `rounds` rounds of `measure` over every set-up in `setups`; results by key, in round order.
 * With `warmUp`, every set-up is first visited once unmeasured (fresh processes run cold code:
 * without it the first set-up of round 1 would pay for the client's warm-up alone).
 */
export async function inRounds<K extends string, C, T>(
  setups: ReadonlyMap<K, C>,
  rounds: number,
  measure: (key: K, setup: C, round: number) => Promise<T>,
  warmUp?: (key: K, setup: C) => Promise<unknown>,
): Promise<Record<K, T[]>> {
  const keys = [...setups.keys()];
  if (warmUp !== undefined) for (const key of keys) await warmUp(key, setups.get(key)!);
  const out = Object.fromEntries(keys.map((k) => [k, [] as T[]])) as Record<K, T[]>;
  for (let round = 0; round < rounds; round++) {
    for (const key of rotation(keys, round)) {
      out[key].push(await measure(key, setups.get(key)!, round));
    }
  }
  return out;
}

/** Median over rounds of mine[i] / base[i]. */
export function medianRatio(mine: readonly number[], base: readonly number[]): number {
  const n = Math.min(mine.length, base.length);
  return median(mine.slice(0, n).map((v, i) => v / base[i]!));
}

/** BENCH_ROUNDS=N overrides the rounds of the phases that read it (a quick check: 1). */
export function roundsFromEnv(fallback: number): number {
  const n = Number(process.env.BENCH_ROUNDS ?? "");
  return Number.isInteger(n) && n > 0 ? n : fallback;
}
