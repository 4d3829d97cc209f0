// Resync progress as `drbdadm status` shows it: how much of the snapshot the standby has
// confirmed, the average rate since it began and the time left at that rate. Pure: the caller
// gives the monotonic clock reading.

export interface ResyncProgress {
  /** Buffer bytes the snapshot covers (zero pages included: they are skipped, not absent). */
  readonly totalBytes: number;
  /** Of those, the bytes covered by the chunks the standby acknowledged. */
  readonly doneBytes: number;
  /** doneBytes / totalBytes × 100, one decimal; 100 for an empty snapshot. */
  readonly percent: number;
  /** Average since the snapshot began (bytes covered per second); 0 before the first ack. */
  readonly rateBytesPerSecond: number;
  /** Seconds left at that rate; null while the rate is still unknown. */
  readonly etaSeconds: number | null;
  readonly elapsedSeconds: number;
}

export function resyncProgress(
  snapshot: { readonly totalBytes: number; readonly doneBytes: number; readonly startedMs: number },
  nowMs: number,
): ResyncProgress {
  const { totalBytes } = snapshot;
  const doneBytes = Math.min(snapshot.doneBytes, totalBytes);
  const elapsedSeconds = Math.max(0, nowMs - snapshot.startedMs) / 1000;
  const rate = elapsedSeconds > 0 ? doneBytes / elapsedSeconds : 0;
  const left = totalBytes - doneBytes;
  return {
    totalBytes,
    doneBytes,
    percent: totalBytes === 0 ? 100 : Math.floor((doneBytes / totalBytes) * 1000) / 10,
    rateBytesPerSecond: Math.round(rate),
    etaSeconds: left === 0 ? 0 : rate > 0 ? Math.ceil(left / rate) : null,
    elapsedSeconds,
  };
}
