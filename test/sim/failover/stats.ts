// What a failover run did, summed over seeds to show every path was taken (and compared
// between two runs of one seed to show it replays exactly).
export interface FailoverStats {
  framesIssued: number;
  framesAcked: number;
  incrementsAcked: number;
  guestResumes: number;
  guestsFailed: number;
  coldStarts: number;
  watchProbes: number;
  recoveryTakeovers: number;
  recoveryStarts: number;
  rejoinsAsStandby: number;
  promotions: number;
  promotionEpochMax: number;
  /** Takeovers that found a received-but-unapplied backlog and waited for the device. */
  takeoversAwaitingBacklog: number;
  backlogsApplied: number;
  ineligibleExpiries: number;
  selfPauseDetected: number;
  stepDownsDiscarding: number;
  stepDownsKeeping: number;
  splitBrains: number;
  splitBrainsHealed: number;
  soloWorkDiscarded: number;
  discardedAckedFrames: number;
  lostAckedFrames: number;
  unreportedSoloLoss: number;
  supersededLoss: number;
  switchoversRequested: number;
  switchoversDone: number;
  switchoversFailed: number;
  primariesMet: number;
  staleEpochRefusals: number;
  /** Replicas a standby dropped as another history than its primary's (foreignReplica). */
  foreignReplicasDropped: number;
  /** Of those, told by their lineage alone (no longer than the primary's log, or a kept one). */
  foreignByLineageOnly: number;
  /** Takeovers with the replica a snapshot in progress was replacing (the best state left). */
  takeoversMidSnapshot: number;
  /** Recovery takeovers put off because the device had a backlog to apply first. */
  recoveriesAwaitingBacklog: number;
  /** Takeovers waiting for the backlog called off: the old primary spoke (peer mode). */
  takeoversCalledOff: number;
  /** Standby devices failed by the plan (params deviceFailure) during a backlog wait. */
  standbyDevicesFailed: number;
  /** Takeovers that waited for a device that failed: given up, never promoted with it. */
  takeoversDroppedForDevice: number;
  /** Nodes that exited because their device failed (restarted later, as systemd would). */
  deviceFailureExits: number;
  crashes: number;
  crashesOfPrimary: number;
  restarts: number;
  pausesShort: number;
  pausesLong: number;
  partitionsTwoWay: number;
  partitionsOneWay: number;
  partitionKills: number;
  resets: number;
  guestResets: number;
  degradedPeriods: number;
  fencedPeriods: number;
  snapshotsStarted: number;
  snapshotsInstalled: number;
  resumedFromLog: number;
  handoversAccepted: number;
  messagesDropped: number;
  messagesDuplicated: number;
  messagesReordered: number;
  /** etcd mode. */
  etcdRuns: number;
  etcdKeyAcquired: number;
  etcdKeyRetaken: number;
  etcdKeyExpired: number;
  etcdCuts: number;
  events: number;
}

export function emptyFailoverStats(): FailoverStats {
  return {
    framesIssued: 0,
    framesAcked: 0,
    incrementsAcked: 0,
    guestResumes: 0,
    guestsFailed: 0,
    coldStarts: 0,
    watchProbes: 0,
    recoveryTakeovers: 0,
    recoveryStarts: 0,
    rejoinsAsStandby: 0,
    promotions: 0,
    promotionEpochMax: 0,
    takeoversAwaitingBacklog: 0,
    backlogsApplied: 0,
    ineligibleExpiries: 0,
    selfPauseDetected: 0,
    stepDownsDiscarding: 0,
    stepDownsKeeping: 0,
    splitBrains: 0,
    splitBrainsHealed: 0,
    soloWorkDiscarded: 0,
    discardedAckedFrames: 0,
    lostAckedFrames: 0,
    unreportedSoloLoss: 0,
    supersededLoss: 0,
    switchoversRequested: 0,
    switchoversDone: 0,
    switchoversFailed: 0,
    primariesMet: 0,
    staleEpochRefusals: 0,
    foreignReplicasDropped: 0,
    foreignByLineageOnly: 0,
    takeoversMidSnapshot: 0,
    recoveriesAwaitingBacklog: 0,
    takeoversCalledOff: 0,
    standbyDevicesFailed: 0,
    takeoversDroppedForDevice: 0,
    deviceFailureExits: 0,
    crashes: 0,
    crashesOfPrimary: 0,
    restarts: 0,
    pausesShort: 0,
    pausesLong: 0,
    partitionsTwoWay: 0,
    partitionsOneWay: 0,
    partitionKills: 0,
    resets: 0,
    guestResets: 0,
    degradedPeriods: 0,
    fencedPeriods: 0,
    snapshotsStarted: 0,
    snapshotsInstalled: 0,
    resumedFromLog: 0,
    handoversAccepted: 0,
    messagesDropped: 0,
    messagesDuplicated: 0,
    messagesReordered: 0,
    etcdRuns: 0,
    etcdKeyAcquired: 0,
    etcdKeyRetaken: 0,
    etcdKeyExpired: 0,
    etcdCuts: 0,
    events: 0,
  };
}
