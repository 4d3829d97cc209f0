// The standby's decisions as a pure machine (etcd raft's RawNode: inputs in, actions out; the
// driver does the I/O). It watches the primary's lease, says when an eligible replica takes
// over, parks arriving guests while a promotion is under way, and in etcd mode takes over only
// by acquiring the leader key: a read, maybe a probe of the peer, then the acquisition, each
// a request out and an answer in. An answer to no request under way (a late one) is ignored.
// No timers, no sockets, no awaits: the driver (standby-driver.ts) arms the timers and makes
// the requests the actions name.
import {
  type AcquireDecision,
  type ClusterRecord,
  type Holding,
  holdingOf,
  type LeaseTerms,
  mayAcquire,
  type PeerView,
  watchStandbyLease,
} from "@vgpu-ha/common/core";

/** How long arriving guests wait for a promotion before they are refused. */
export const PARK_MS = 2000;
/** etcd mode: how often a standby whose primary handed over looks for the freed key. */
export const HANDOVER_POLL_MS = 10;

export interface StandbyMachineOptions {
  readonly nodeId: string;
  /** This node is configured `role: primary` (it starts the pair when no state survives). */
  readonly configuredPrimary: boolean;
  readonly lease: LeaseTerms;
  /** etcd mode: how often the leader key is read; undefined in peer mode. */
  readonly etcdPollMs: number | undefined;
}

/** What the machine needs to know of the replica and the node at each input. */
export interface StandbyFacts {
  /** The replica holds its primary's sync grant (it may take over). */
  readonly eligible: boolean;
  /** A replica with something in it, granted or not (StandbyDriver.holdsReplica). */
  readonly holdsReplica: boolean;
  /** Maintenance mode: no automatic takeover. */
  readonly maintenancePaused: boolean;
  /** The node's persisted epoch. */
  readonly epoch: number;
  /**
   * Entries received and not yet applied by this node's device. A takeover waits until it is
   * 0: the new primary holds everything its old one may have acknowledged (sync mode).
   */
  readonly backlog: number;
}

/** Something the observer is told (a log line in the daemon, a count in the simulator). */
export type StandbyNote =
  /** This process was stopped since the last look: the lease is judged from the wake-up. */
  | { readonly kind: "woke" }
  /** The primary's lease expired and this replica may not take over (once per expiry). */
  | { readonly kind: "ineligible" }
  /** The lease expired in maintenance mode: no takeover (once per expiry). */
  | { readonly kind: "paused" }
  /** etcd mode: the key is free; what the rule decided (when it changed). */
  | { readonly kind: "etcdDecision"; readonly decision: AcquireDecision }
  | { readonly kind: "etcdKeyAcquired"; readonly epoch: number }
  /** A takeover waits for the device to apply the received backlog (this many entries). */
  | { readonly kind: "awaitingBacklog"; readonly entries: number }
  /** The backlog is applied: the takeover goes on after waiting this long. */
  | { readonly kind: "backlogApplied"; readonly waitedMs: number }
  /** The old primary spoke while the takeover waited for the backlog: no takeover (peer mode). */
  | { readonly kind: "takeoverCalledOff" }
  /**
   * The replica's device failed: it completes nothing more, so this standby never takes over
   * (`takeoverDropped`: a takeover waiting for its backlog was given up) and the node exits.
   */
  | {
      readonly kind: "deviceFailed";
      readonly reason: string;
      readonly seq: number;
      /** Entries received and never to be applied (the backlog when the device failed). */
      readonly backlog: number;
      readonly takeoverDropped: boolean;
    };

/**
 * What the driver does, in order. `promote` asks the node to take over: the node persists the
 * new epoch before it serves (Supervisor.promote).
 */
export type StandbyAction =
  | {
      readonly kind: "promote";
      readonly reason: "lease_expired" | "switchover" | "etcd_key_acquired";
      readonly force: boolean;
      /** etcd mode: the record's new epoch, written with the key. */
      readonly epoch?: number;
    }
  /** Park arriving guests for `ms` (re-arms the timer); then call parkExpired(). */
  | { readonly kind: "park"; readonly ms: number }
  | { readonly kind: "etcdRead" }
  /** Ask the peer what it holds; answer with peerProbed(). */
  | { readonly kind: "probePeer" }
  /** Take the key with the record's new epoch, conditioned on the view last read. */
  | { readonly kind: "etcdAcquire"; readonly epoch: number }
  /** Call backlogApplied() once the device has applied everything received so far. */
  | { readonly kind: "awaitDevice" }
  /**
   * The replica's device failed: the node can serve no one with it and steps down (the
   * daemon exits with code 3 and restarts empty: Supervisor.deviceFailed).
   */
  | { readonly kind: "deviceFailed"; readonly failure: DeviceFailureFact }
  | { readonly kind: "note"; readonly note: StandbyNote };

/** A device failure as the machine is told of it (gpu-model's DeviceFailure). */
export interface DeviceFailureFact {
  readonly reason: string;
  /** The seq of the entry whose device work was running (0: none known). */
  readonly seq: number;
}

/** The standby's etcd view, for status. */
export interface EtcdStatus {
  readonly leader: string | null;
  readonly decision: string;
  readonly error?: string;
}

/** What the leader key and the record say (EtcdView, whatever transport read it). */
export interface EtcdReading {
  readonly leader: { readonly nodeId: string; readonly epoch: number } | undefined;
  readonly record: ClusterRecord | undefined;
}

type EtcdPhase =
  | { readonly phase: "idle" }
  | { readonly phase: "reading" }
  | { readonly phase: "probing"; readonly record: ClusterRecord | undefined }
  | { readonly phase: "acquiring"; readonly epoch: number };

const IDLE: EtcdPhase = { phase: "idle" };

export class StandbyMachine {
  private readonly options: StandbyMachineOptions;
  private lastWatchMs: number | undefined;
  /** The primary's last message as the lease watch counts it (undefined: none yet). */
  heardMs: number | undefined;
  private promoting = false;
  private stopped = false;
  /** The replica's device failed: nothing is decided any more (deviceFailed). */
  private failed = false;
  private ineligibleNoted = false;
  private pausedNoted = false;
  private parkingNow = false;
  private etcd: EtcdPhase = IDLE;
  private etcdLastMs = Number.NEGATIVE_INFINITY;
  /** etcd mode: the primary handed over; take the key as soon as it gives it up. */
  private handoverPending = false;
  /** etcd mode: what the last look found, for status. */
  etcdStatus: EtcdStatus | undefined;
  /** A takeover decided while the device still had a backlog, and when it was decided. */
  private held: { readonly promote: StandbyAction; readonly sinceMs: number } | undefined;
  /** How long the last takeover waited for the backlog (ms; 0: none to wait for). */
  lastBacklogWaitMs: number | undefined;

  constructor(options: StandbyMachineOptions) {
    this.options = options;
  }

  /**
   * A takeover is decided and waits for the device to apply the received backlog. Meanwhile
   * the old primary must not be acknowledged: an ack would renew the lease that the takeover
   * counts on having run out (the failover simulator found this).
   */
  get holdingTakeover(): boolean {
    return this.held !== undefined && !this.stopped;
  }

  get parking(): boolean {
    return this.parkingNow && !this.stopped;
  }

  /** One look of the lease watch, `heardMs` the primary's newest message (stream or channel). */
  tick(nowMs: number, heardMs: number | undefined, facts: StandbyFacts): StandbyAction[] {
    const { watch, verdict } = watchStandbyLease(
      { lastWatchMs: this.lastWatchMs, lastMessageMs: heardMs },
      nowMs,
      this.options.lease,
      facts.eligible,
    );
    this.lastWatchMs = watch.lastWatchMs;
    this.heardMs = watch.lastMessageMs;
    if (this.failed) return [];
    if (verdict === "woke") return [note({ kind: "woke" })];
    if (this.options.etcdPollMs !== undefined) return this.pollEtcd(nowMs, this.options.etcdPollMs);
    if (verdict === "no-primary" || this.promoting) return [];
    if (verdict === "live") {
      this.ineligibleNoted = false;
      return [];
    }
    if (verdict === "ineligible") return this.once("ineligibleNoted", { kind: "ineligible" });
    if (facts.maintenancePaused) return this.once("pausedNoted", { kind: "paused" });
    this.pausedNoted = false;
    return this.promote("lease_expired", false, facts, nowMs);
  }

  /**
   * The device applied what was received (the answer to awaitDevice): the takeover held for
   * it goes on — or waits again if more arrived meanwhile.
   */
  backlogApplied(nowMs: number, facts: StandbyFacts): StandbyAction[] {
    const held = this.held;
    if (held === undefined || this.stopped || this.failed) return [];
    if (facts.backlog > 0) return [{ kind: "awaitDevice" }];
    this.held = undefined;
    const waitedMs = nowMs - held.sinceMs;
    this.lastBacklogWaitMs = waitedMs;
    return [note({ kind: "backlogApplied", waitedMs }), held.promote];
  }

  /**
   * The replica's device failed (progress.onFailure): it completes nothing more — the entries
   * still queued on it are never applied, and work handed to it from now on is dropped while
   * its done seq says complete. So this replica is never taken over with: a takeover waiting
   * for the backlog (whose answer would never come: the standby would wait for ever, mute to
   * the old primary) is dropped, no expiry, key or handover promotes it any more, and the node
   * is told to step down (the failure table: a node whose device fails cannot serve). Once.
   */
  deviceFailed(failure: DeviceFailureFact, backlog: number): StandbyAction[] {
    if (this.failed || this.stopped) return [];
    this.failed = true;
    const takeoverDropped = this.held !== undefined;
    this.held = undefined;
    const { reason, seq } = failure;
    return [
      note({ kind: "deviceFailed", reason, seq, backlog, takeoverDropped }),
      { kind: "deviceFailed", failure: { reason, seq } },
    ];
  }

  /** The replica's device failed: this standby takes over no more. */
  get replicaDeviceFailed(): boolean {
    return this.failed;
  }

  /**
   * Peer mode: the old primary spoke while the takeover its lease's expiry decided waits for
   * the backlog — it was stopped, not dead, and woke first. The takeover is called off and the
   * standby answers it again (a later expiry decides anew): held longer than the old primary's
   * fenced period, the takeover kept it unanswered until it served alone, two primaries with no
   * partition (failover seed 23192). etcd mode keeps the key it took; a handover goes on.
   */
  primaryHeard(): StandbyAction[] {
    const held = this.held;
    if (held === undefined || this.stopped || this.options.etcdPollMs !== undefined) return [];
    if (held.promote.kind !== "promote" || held.promote.reason !== "lease_expired") return [];
    this.held = undefined;
    this.promoting = false;
    return [note({ kind: "takeoverCalledOff" })];
  }

  /** The primary handed over (the receiver's handover event). */
  handover(): StandbyAction[] {
    if (this.failed) return [];
    const park = this.park();
    if (this.options.etcdPollMs !== undefined) {
      this.handoverPending = true; // promote once the key is ours
      return park;
    }
    if (this.promoting) return park; // asked already: the node promotes once
    this.promoting = true;
    return [...park, { kind: "promote", reason: "switchover", force: false }];
  }

  /** A guest arrives: it waits for the promotion under way, or is refused. */
  guestArrives(): "park" | "refuse" {
    return this.parking ? "park" : "refuse";
  }

  /** The park timer fired: the guests parked are refused. */
  parkExpired(): void {
    this.parkingNow = false;
  }

  /** The role stops; true when the parked guests are to be refused (not a promotion). */
  stop(reason: string): boolean {
    this.stopped = true;
    return reason !== "promoted";
  }

  // ---- etcd mode ----

  /** The answer to etcdRead (error: etcd did not answer). */
  etcdRead(reading: EtcdReading | Error, facts: StandbyFacts): StandbyAction[] {
    if (this.etcd.phase !== "reading") return [];
    if (reading instanceof Error) return this.unreachable(reading);
    if (reading.leader) {
      this.etcdStatus = { leader: reading.leader.nodeId, decision: "the leader key is held" };
      this.etcd = IDLE;
      return [];
    }
    const decision = this.decide(reading.record, facts, undefined);
    if (decision.acquire) return this.decided(decision, facts);
    // Whether the peer holds the state decides between waiting and starting afresh.
    this.etcd = { phase: "probing", record: reading.record };
    return [{ kind: "probePeer" }];
  }

  /** The answer to probePeer (undefined: the peer did not answer). */
  peerProbed(peer: PeerView | undefined, facts: StandbyFacts): StandbyAction[] {
    if (this.etcd.phase !== "probing") return [];
    const holds = peer && { nodeId: peer.nodeId, holds: holdingOf(peer) };
    return this.decided(this.decide(this.etcd.record, facts, holds), facts);
  }

  /** The answer to etcdAcquire: whether the key is ours (error: etcd did not answer). */
  etcdAcquired(acquired: boolean | Error, facts: StandbyFacts, nowMs: number): StandbyAction[] {
    if (this.etcd.phase !== "acquiring") return [];
    const { epoch } = this.etcd;
    if (acquired instanceof Error) return this.unreachable(acquired);
    this.etcd = IDLE;
    if (!acquired) return [];
    // A key taken is used even by a stopped role: the node promotes whichever standby it runs.
    const reason = this.handoverPending ? "switchover" : "etcd_key_acquired";
    return [
      note({ kind: "etcdKeyAcquired", epoch }),
      ...this.promote(reason, !facts.eligible, facts, nowMs, epoch),
    ];
  }

  private pollEtcd(nowMs: number, pollMs: number): StandbyAction[] {
    if (this.failed || this.promoting || this.etcd.phase !== "idle" || this.stopped) return [];
    const everyMs = this.handoverPending ? HANDOVER_POLL_MS : pollMs;
    if (nowMs - this.etcdLastMs < everyMs) return [];
    this.etcdLastMs = nowMs;
    this.etcd = { phase: "reading" };
    return [{ kind: "etcdRead" }];
  }

  private decide(
    record: ClusterRecord | undefined,
    facts: StandbyFacts,
    peer: { readonly nodeId: string; readonly holds: Holding } | undefined,
  ): AcquireDecision {
    const mine: Holding = facts.eligible
      ? "granted-replica"
      : facts.holdsReplica
        ? "replica"
        : "nothing";
    return mayAcquire({
      me: this.options.nodeId,
      configuredPrimary: this.options.configuredPrimary,
      leaderPresent: false,
      record,
      mine,
      peer,
      localEpoch: facts.epoch,
    });
  }

  private decided(decision: AcquireDecision, facts: StandbyFacts): StandbyAction[] {
    const out: StandbyAction[] = [];
    if (this.etcdStatus?.decision !== decision.reason) {
      out.push(note({ kind: "etcdDecision", decision }));
    }
    this.etcdStatus = { leader: null, decision: decision.reason };
    if (!decision.acquire || this.stopped || this.promoting) {
      this.etcd = IDLE;
      return out;
    }
    // Maintenance mode: a handed-over key is still taken (a switchover); nothing else is.
    if (facts.maintenancePaused && !this.handoverPending) {
      this.etcdStatus = { leader: null, decision: "maintenance mode: not taking the key" };
      this.etcd = IDLE;
      return out;
    }
    this.etcd = { phase: "acquiring", epoch: decision.epoch };
    out.push({ kind: "etcdAcquire", epoch: decision.epoch });
    return out;
  }

  private unreachable(error: Error): StandbyAction[] {
    this.etcdStatus = { leader: null, decision: "etcd unreachable", error: error.message };
    this.etcd = IDLE;
    return [];
  }

  // ---- shared ----

  /**
   * Takes over — once the device has applied the whole received backlog: until then the
   * promotion is held (awaitDevice, answered by backlogApplied) and guests are parked.
   */
  private promote(
    reason: "lease_expired" | "switchover" | "etcd_key_acquired",
    force: boolean,
    facts: StandbyFacts,
    nowMs: number,
    epoch?: number,
  ): StandbyAction[] {
    if (this.failed) return []; // a failed device's replica is never served
    this.promoting = true;
    const promote: StandbyAction = {
      kind: "promote",
      reason,
      force,
      ...(epoch === undefined ? {} : { epoch }),
    };
    if (facts.backlog === 0) {
      this.lastBacklogWaitMs = 0;
      return [...this.park(), promote];
    }
    this.held = { promote, sinceMs: nowMs };
    const waiting = note({ kind: "awaitingBacklog", entries: facts.backlog });
    return [...this.park(), waiting, { kind: "awaitDevice" }];
  }

  private park(): StandbyAction[] {
    this.parkingNow = true;
    return [{ kind: "park", ms: PARK_MS }];
  }

  /** A note said once until the flag is reset. */
  private once(flag: "ineligibleNoted" | "pausedNoted", n: StandbyNote): StandbyAction[] {
    if (this[flag]) return [];
    this[flag] = true;
    return [note(n)];
  }
}

function note(n: StandbyNote): StandbyAction {
  return { kind: "note", note: n };
}
