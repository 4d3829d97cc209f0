// Device handles: 32-bit, non-zero, drawn from a per-device seeded generator, so two devices
// with different seeds give different handles for the same history (which is what proves the
// guest↔device handle mapping works).

/** mulberry32: small, fast, good enough to scatter handles; deterministic for a seed. */
export class HandleGenerator {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** The next handle not in `taken` (and never 0). */
  next(taken: (handle: number) => boolean): number {
    for (;;) {
      const h = this.draw();
      if (h !== 0 && !taken(h)) return h;
    }
  }

  private draw(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }
}
