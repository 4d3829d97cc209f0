// What a simulated run reports: its failure (if any), its end state, and counts of what it did
// (summed over seeds, they show every path was taken).
/** What a run did, for coverage across seeds and for the determinism check. */
export interface SimStats {
  framesIssued: number;
  entries: number;
  /** Sync replies released on the standby's ack (each checked against what it holds). */
  repliesSync: number;
  /** Of those, released while the standby had received but not yet applied the entry (sync). */
  repliesBeforeStandbyApplied: number;
  /** Promotion probes that found an eligible standby, and those that waited for its backlog. */
  promotionProbes: number;
  promotionBacklogWaits: number;
  /** Entries the standby applied while holding, each checked against the primary's device. */
  holdChecked: number;
  /** Events after which the standby held received entries for the primary's device. */
  holdsSeen: number;
  /** Late comparisons never made: the primary's late result was lost on the link. */
  lateChecksLeftOpen: number;
  /** Sync replies released at once because no standby was in sync (the primary was alone). */
  repliesDegraded: number;
  /** Released as soon as applied: async mode, or a frame that was rejected (nothing to wait for). */
  repliesAtOnce: number;
  snapshotsStarted: number;
  snapshotsResumed: number;
  snapshotsInstalled: number;
  resumedFromLog: number;
  gapResyncs: number;
  disconnects: number;
  standbyRestarts: number;
  checkpoints: number;
  entriesApplied: number;
  messagesDropped: number;
  messagesDuplicated: number;
  messagesReordered: number;
  events: number;
}

export interface SimResult {
  readonly seed: number;
  /** Undefined when every check held. */
  readonly failure: string | undefined;
  readonly endMs: number;
  readonly lastSeq: number;
  readonly digest: string;
  /** A hash of every event's kind and time: equal for two runs of one seed. */
  readonly trace: number;
  readonly stats: SimStats;
}

export function emptyStats(): SimStats {
  return {
    framesIssued: 0,
    entries: 0,
    repliesSync: 0,
    repliesBeforeStandbyApplied: 0,
    promotionProbes: 0,
    promotionBacklogWaits: 0,
    holdChecked: 0,
    holdsSeen: 0,
    lateChecksLeftOpen: 0,
    repliesDegraded: 0,
    repliesAtOnce: 0,
    snapshotsStarted: 0,
    snapshotsResumed: 0,
    snapshotsInstalled: 0,
    resumedFromLog: 0,
    gapResyncs: 0,
    disconnects: 0,
    standbyRestarts: 0,
    checkpoints: 0,
    entriesApplied: 0,
    messagesDropped: 0,
    messagesDuplicated: 0,
    messagesReordered: 0,
    events: 0,
  };
}
