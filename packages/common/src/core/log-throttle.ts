// At most one log line per key per interval, on an injected clock: the lines left out are
// counted and reported with the next line of their key, so a flood of refusals costs the log
// one line a second per reason and still says how many there were.

export type ThrottleVerdict =
  | { readonly log: true; readonly suppressed: number }
  | { readonly log: false };

export class LogThrottle {
  private readonly intervalMs: number;
  private readonly last = new Map<string, { atMs: number; suppressed: number }>();

  constructor(intervalMs = 1000) {
    this.intervalMs = intervalMs;
  }

  /** One event of `key` now: whether to log it, and how many were left out before it. */
  note(key: string, nowMs: number): ThrottleVerdict {
    const l = this.last.get(key);
    if (l === undefined) {
      this.last.set(key, { atMs: nowMs, suppressed: 0 });
      return { log: true, suppressed: 0 };
    }
    if (nowMs - l.atMs < this.intervalMs) {
      l.suppressed++;
      return { log: false };
    }
    const suppressed = l.suppressed;
    l.atMs = nowMs;
    l.suppressed = 0;
    return { log: true, suppressed };
  }
}
