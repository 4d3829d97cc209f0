// A token bucket on the injected clock: `ratePerSecond` tokens a second, at most `burst` held.
// Pure (the caller passes the time); a clock that goes backwards adds nothing.

export class TokenBucket {
  readonly ratePerSecond: number;
  readonly burst: number;
  private tokens: number;
  private atMs: number;

  constructor(ratePerSecond: number, burst: number, nowMs: number) {
    this.ratePerSecond = ratePerSecond;
    this.burst = burst;
    this.tokens = burst;
    this.atMs = nowMs;
  }

  /** Takes one token if there is one. */
  take(nowMs: number): boolean {
    this.refill(nowMs);
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** Whether `n` tokens (at most the burst) are there now; takes none. */
  has(nowMs: number, n = 1): boolean {
    this.refill(nowMs);
    return this.tokens >= Math.min(n, this.burst);
  }

  /** Milliseconds until `n` tokens (at most the burst) will be there (0 if they are). */
  waitMs(nowMs: number, n = 1): number {
    this.refill(nowMs);
    const want = Math.min(n, this.burst);
    return this.tokens >= want ? 0 : ((want - this.tokens) * 1000) / this.ratePerSecond;
  }

  private refill(nowMs: number): void {
    const elapsedMs = Math.max(0, nowMs - this.atMs);
    this.tokens = Math.min(this.burst, this.tokens + (elapsedMs * this.ratePerSecond) / 1000);
    this.atMs = Math.max(this.atMs, nowMs);
  }
}
