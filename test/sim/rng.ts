// The simulator's seeded PRNG (splitmix32): every random choice of a run comes from one of
// these, so a seed replays the run exactly.
export class SimRng {
  private state: number;

  constructor(seed: number) {
    this.state = (seed ^ 0x2545f491) >>> 0;
  }

  u32(): number {
    this.state = (this.state + 0x9e3779b9) >>> 0;
    let z = this.state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  }

  /** A float in [0, 1). */
  unit(): number {
    return this.u32() / 2 ** 32;
  }

  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.unit() * (hi - lo + 1));
  }

  /** A float in [lo, hi). */
  real(lo: number, hi: number): number {
    return lo + this.unit() * (hi - lo);
  }

  /** True with probability `p` (0..1). */
  chance(p: number): boolean {
    return this.unit() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty list");
    return items[Math.floor(this.unit() * items.length)]!;
  }

  /** An exponential wait with the given mean (a Poisson process's gaps). */
  exponential(meanMs: number): number {
    return -Math.log(1 - this.unit()) * meanMs;
  }

  /** An independent generator for one concern (network, guests, faults…) of the same run. */
  fork(salt: number): SimRng {
    return new SimRng((this.u32() ^ Math.imul(salt, 0x27d4eb2d)) >>> 0);
  }
}
