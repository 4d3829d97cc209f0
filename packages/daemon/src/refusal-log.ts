// Refusals come from strangers, who choose how many there are: each is counted, but logged at
// most once a second per kind, with how many were refused since the last line, so a flood
// cannot flood the log (or the disk) too. Lines keep one stable shape per kind, naming the
// remote address, for tools such as fail2ban.

export interface WarnLog {
  warn(fields: object, msg: string): void;
}

/** Returns report(kind, fields, msg): logs the first of each kind per interval, counts the rest. */
export function rateLimitedWarn(
  log: WarnLog,
  minIntervalMs = 1000,
  nowMs: () => number = () => performance.now(),
): (kind: string, fields: object, msg: string) => void {
  const last = new Map<string, { atMs: number; unlogged: number }>();
  return (kind, fields, msg) => {
    const now = nowMs();
    const seen = last.get(kind);
    if (seen && now - seen.atMs < minIntervalMs) {
      seen.unlogged++;
      return;
    }
    log.warn({ ...fields, refusedSinceLastLine: seen?.unlogged ?? 0 }, msg);
    last.set(kind, { atMs: now, unlogged: 0 });
  };
}
