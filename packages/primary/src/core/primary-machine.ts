// The primary role's decisions as a pure machine (raft's RawNode): facts and answers in,
// actions out; the driver (primary-driver.ts) owns the timers, the link, the guests and etcd,
// and carries the actions out. It composes the rules of common/core — stepPeerLease,
// releasableSeq, stepGrant, grantDue, stepSoloMark/soloWork, otherPrimaryWins — and the Sender
// (which it reads, and whose grant, epoch and handover it sets); it restates none of them.
//
// Lease: peer mode moves leased → fenced → degraded by the acknowledged heartbeats (on either
// carrier: the stream, or the lease thread); etcd mode serves on the etcd lease alone and keeps
// the standby's grant in the record (primary-etcd.ts). A planned switchover is a state with
// deadlines (primary-switchover.ts).
import {
  confirmedBy,
  type DiscardedWork,
  GRANTED,
  type GrantState,
  grantBinds,
  grantDue,
  helloRefusal,
  type IdentityRefusal,
  type LeaseTerms,
  NO_GRANT,
  NO_HELLO,
  otherPrimaryWins,
  type PeerIdentityRule,
  type PrimaryLeaseState,
  type PrimaryMessage,
  primaryLeaseEndMs,
  RELEASE_ALL,
  type ReleaseView,
  type ReplicationLog,
  type ReplicationMode,
  releasableSeq,
  type SoloMark,
  type StandbyLinkState,
  soloMarkAt,
  soloWork,
  stepGrant,
  stepPeerLease,
  stepSoloMark,
  type WorkCounters,
} from "@vgpu-ha/common/core";
import type { EtcdReadView, EtcdRequest, EtcdRequestsOptions } from "./primary-etcd.js";
import { EtcdRequests } from "./primary-etcd.js";
import type { Sender, SenderEvent } from "./sender.js";

export type PrimaryLease = PrimaryLeaseState;

export interface PrimaryMachineOptions {
  /** Who we and our peer are (hellos from anyone else are refused before their epoch counts). */
  readonly identity: PeerIdentityRule;
  readonly mode: ReplicationMode;
  readonly lease: LeaseTerms;
  /** etcd mode (lease.mode etcd); undefined: peer mode. */
  readonly etcd: Omit<EtcdRequestsOptions, "nodeId"> | undefined;
  /**
   * Guests wait while the standby lags by more than any of these: entries and bytes not yet
   * applied, entries not received for longer than maxLagMs, not applied for longer than
   * maxApplyLagMs (a takeover waits for the standby's backlog: this bounds that wait).
   */
  readonly maxLagEntries: number;
  readonly maxLagBytes: number;
  readonly maxLagMs: number;
  readonly maxApplyLagMs: number;
}

/** What the machine reads at each step, besides the Sender and the log. */
export interface PrimaryFacts {
  readonly nowMs: number;
  /** The highest seq any reply went out for (GuestPort.releasedSeq). */
  readonly releasedSeq: number;
  /** Frames applied, replies sent, sessions opened so far (GuestPort.applied). */
  readonly applied: Omit<WorkCounters, "lastSeq">;
  /** The lease thread's newest acknowledged heartbeat send time (ms); undefined: none. */
  readonly leaseThreadAckedMs: number | undefined;
  /** etcd mode: whether this node holds the leader key, and until when its lease holds. */
  readonly etcd: { readonly holding: boolean; readonly leaseEndMs: number } | undefined;
  /** The highest seq whose device work is complete (ReleaseView.deviceSeq); absent: all. */
  readonly deviceSeq?: number;
}

/** What the observer is told (logs, metrics, the simulator's checker). */
export type PrimaryNotice =
  | { readonly kind: "leaseChanged"; readonly from: PrimaryLease; readonly to: PrimaryLease }
  | { readonly kind: "grantChanged"; readonly granted: boolean }
  | { readonly kind: "etcdNamed" }
  | { readonly kind: "etcdCleared" }
  | { readonly kind: "keyRetaken"; readonly epoch: number }
  | { readonly kind: "handoverAccepted" };

export type PrimaryAction =
  | { readonly kind: "notice"; readonly notice: PrimaryNotice }
  /** Send every held reply the release view now allows. */
  | { readonly kind: "release" }
  | { readonly kind: "etcd"; readonly request: EtcdRequest }
  /** A higher epoch was met: become a standby. */
  | { readonly kind: "stepDown"; readonly epoch: number; readonly reason: string }
  /** etcd mode: the key was taken back at this epoch: persist it. */
  | { readonly kind: "adoptEpoch"; readonly epoch: number }
  /** The standby accepted a handover: send every guest to it. */
  | { readonly kind: "endGuests"; readonly reason: string };

/** What to do with another primary's (or a stranger's) first message on our replication port. */
export type HelloDecision =
  | { readonly kind: "refuse"; readonly refusal: IdentityRefusal }
  | { readonly kind: "stepDown"; readonly epoch: number; readonly reason: string }
  | { readonly kind: "refuseLower" };

export class PrimaryMachine {
  private readonly options: PrimaryMachineOptions;
  readonly sender: Sender;
  private readonly log: ReplicationLog;
  private readonly etcd: EtcdRequests | undefined;
  lease: PrimaryLease = "fenced";
  private fencedSinceMs: number | undefined;
  /** When the lease was last stepped: stepPeerLease notices this process was stopped. */
  private steppedMs: number | undefined;
  /** The highest seq a standby of this epoch confirmed (confirmedBy: received or applied). */
  confirmedSeq = 0;
  /** The standby's sync grant (core/release.ts; etcd mode: whether the record names it). */
  grant: GrantState = NO_GRANT;
  /** Where solo work began (not leased): what a step-down discards. */
  private solo: SoloMark | undefined;
  /** The standby accepted a handover: guests go to it from now on. */
  handedOff = false;
  /** A planned switchover holds guests (set by the driver's switchover states). */
  switchingOver = false;
  stopped = false;

  constructor(options: PrimaryMachineOptions, sender: Sender, log: ReplicationLog) {
    this.options = options;
    this.sender = sender;
    this.log = log;
    const e = options.etcd;
    this.etcd = e && new EtcdRequests({ ...e, nodeId: options.identity.nodeId });
  }

  /**
   * Starts the lease clock. Promotion followed the old primary's lease expiry: it has stopped
   * acknowledging, so a promoted node serves at once, alone until its new standby rejoins.
   */
  start(f: PrimaryFacts, promoted: boolean): void {
    this.fencedSinceMs = f.nowMs;
    if (!promoted) return;
    this.lease = "degraded";
    this.confirmedSeq = this.log.lastSeq;
    this.solo = soloMarkAt(this.confirmedSeq, this.work(f));
  }

  stop(): void {
    this.stopped = true;
    this.etcd?.stop();
  }

  /** The lease timer, and after every step of the link: moves between the lease states. */
  tick(f: PrimaryFacts): PrimaryAction[] {
    if (this.stopped) return [];
    const before = this.lease;
    const ackedMs = this.ackedHeartbeatMs(f);
    const step = stepPeerLease(
      { lease: this.lease, fencedSinceMs: this.fencedSinceMs, steppedMs: this.steppedMs },
      f.nowMs,
      ackedMs > 0 ? primaryLeaseEndMs(ackedMs, this.options.lease) : undefined,
      this.options.lease.leaseMs,
    );
    this.lease = step.lease;
    this.fencedSinceMs = step.fencedSinceMs;
    this.steppedMs = step.steppedMs;
    this.solo = stepSoloMark(this.lease, this.solo, this.confirmedSeq, this.work(f));
    // Peer mode: serving alone, the standby's grant is revoked before anything it lacks goes out.
    const out = this.etcd ? this.etcdTick(f) : this.stepGrant(f);
    if (before !== this.lease) {
      out.push(notice({ kind: "leaseChanged", from: before, to: this.lease }), RELEASE);
    }
    return out;
  }

  /** After each step of the link: what the standby confirmed counts, then the lease. */
  progress(f: PrimaryFacts): PrimaryAction[] {
    const s = this.sender;
    if (s.inSync)
      this.confirmedSeq = Math.max(this.confirmedSeq, confirmedBy(this.options.mode, s));
    return [...this.tick(f), RELEASE];
  }

  releaseView(f: PrimaryFacts): ReleaseView {
    const s = this.sender;
    // The timer may not have run yet since the lease ended: judge by the clock.
    const ackedMs = this.ackedHeartbeatMs(f);
    const lapsed =
      this.lease === "leased" && f.nowMs >= primaryLeaseEndMs(ackedMs, this.options.lease);
    let lease: PrimaryLease = lapsed ? "fenced" : this.lease;
    // etcd mode: the right to serve is the etcd lease alone; the grant is in the record.
    if (f.etcd) lease = f.nowMs < f.etcd.leaseEndMs ? "leased" : "fenced";
    return {
      mode: this.options.mode,
      lease,
      link: linkState(s),
      granted: grantBinds(this.grant),
      standbyFarBehind: this.standbyFarBehind(f.nowMs),
      appliedSeq: s.appliedSeq,
      receivedSeq: s.receivedSeq,
      deviceSeq: f.deviceSeq,
      confirmedSeq: this.confirmedSeq,
    };
  }

  /** Until when this node may acknowledge (peer: the lease; etcd: its etcd lease). */
  servingLeaseEndMs(f: PrimaryFacts): number {
    if (f.etcd) return f.etcd.leaseEndMs;
    if (this.lease !== "leased") return Number.NEGATIVE_INFINITY;
    return primaryLeaseEndMs(this.ackedHeartbeatMs(f), this.options.lease);
  }

  /**
   * An ungranted streaming standby whose oldest unapplied entry is older than half of
   * maxApplyLagMs: holding replies for it would stall guests that long and more (after a
   * snapshot it has every entry queued during it to apply). Replies go out meanwhile; once it
   * is nearer, they wait for it (at most about half of maxApplyLagMs) and it earns the grant.
   */
  private standbyFarBehind(nowMs: number): boolean {
    const s = this.sender;
    if (this.options.mode === "async" || grantBinds(this.grant) || s.state !== "streaming")
      return false;
    // Serving alone (degraded), what goes out is solo work: the standby catching up is then
    // the only other copy of it, so replies wait for it however far behind it is.
    if (this.lease !== "leased") return false;
    return this.log.lagAfter(s.appliedSeq, nowMs).seconds * 1000 > this.options.maxApplyLagMs / 2;
  }

  /** Which replies may go out now: a seq, or undefined for all (GuestHooks.replicatedSeq). */
  releasable(f: PrimaryFacts): number | undefined {
    const seq = releasableSeq(this.releaseView(f));
    return seq === RELEASE_ALL ? undefined : seq;
  }

  /**
   * Whether guests wait (the standby lags beyond a bound); undefined while a switchover holds
   * them. The time bound keeps heartbeats (queued behind the backlog) inside the lease; during
   * a snapshot the entries wait for its end anyway, so only the size bounds apply then.
   */
  backPressure(nowMs: number): boolean | undefined {
    if (this.switchingOver) return undefined;
    const s = this.sender;
    if (s.state !== "streaming" && s.state !== "snapshot") return false;
    const snapshot = s.state === "snapshot";
    const from = snapshot ? (s.snapshotProgress?.atSeq ?? 0) : s.appliedSeq;
    const lag = this.log.lagAfter(from, nowMs);
    const o = this.options;
    if (lag.entries > o.maxLagEntries || lag.bytes > o.maxLagBytes) return true;
    if (snapshot) return false;
    // The apply-lag bound keeps a takeover's backlog short; a standby without the grant cannot
    // take over, and its catching up after a snapshot must not hold guests (the size bounds
    // above still make it catch up).
    if (grantBinds(this.grant) && lag.seconds * 1000 > o.maxApplyLagMs) return true;
    return this.log.lagAfter(s.receivedSeq, nowMs).seconds * 1000 > o.maxLagMs;
  }

  /** Reactions to the Sender's events. */
  senderEvent(e: SenderEvent, nowMs: number): PrimaryAction[] {
    if (e.kind === "higherEpoch") {
      return [{ kind: "stepDown", epoch: e.epoch, reason: `peer is at epoch ${e.epoch}` }];
    }
    if (e.kind === "resync" && e.reason === "diverged") return this.revokeDiverged(nowMs);
    if (e.kind !== "handoverAccepted") return [];
    // Stepping down here, before the standby serves, was measured slower: guests bounced
    // between two refusing nodes. The new primary's dial makes this node step down. The guests
    // go over now: the standby parks them until it serves as primary.
    this.handedOff = true;
    const out: PrimaryAction[] = [
      notice({ kind: "handoverAccepted" }),
      { kind: "endGuests", reason: "switchover: the standby is taking over" },
    ];
    // etcd mode: the standby takes over only by taking the key: name it (a lapse during the
    // handover may have cleared the name), then give the key up (resign).
    const request = this.etcd?.begin(
      {
        kind: "setReplica",
        epoch: this.sender.epoch,
        replica: this.options.identity.peerName,
        purpose: "handover",
      },
      true,
    );
    if (request) out.push({ kind: "etcd", request });
    return out;
  }

  /**
   * Another primary dials us: the lower epoch steps down — but only our own peer's epoch
   * counts; a hello from another cluster or node is refused before its epoch is read.
   */
  hello(m: PrimaryMessage, epoch: number): HelloDecision {
    const who = m.kind === "hello" ? helloRefusal(this.options.identity, m) : null;
    if (m.kind !== "hello" || who !== null) return { kind: "refuse", refusal: who ?? NO_HELLO };
    if (otherPrimaryWins({ epoch, nodeId: this.options.identity.nodeId }, m)) {
      return {
        kind: "stepDown",
        epoch: m.epoch,
        reason: `met primary ${m.nodeId} of epoch ${m.epoch}`,
      };
    }
    return { kind: "refuseLower" };
  }

  // ---- etcd answers ----

  etcdRead(view: EtcdReadView | undefined): PrimaryAction[] {
    const request = this.etcd?.readAnswered(view, this.sender.epoch);
    return request ? [{ kind: "etcd", request }] : [];
  }

  /** etcd answered `request` (`ok`: acquired or written). */
  etcdAnswered(request: EtcdRequest, ok: boolean): PrimaryAction[] {
    const outcome = this.etcd?.answered(request, ok) ?? { kind: "none" };
    switch (outcome.kind) {
      case "none":
        return [];
      case "named":
        this.sender.syncGrant = true;
        return [notice({ kind: "etcdNamed" })];
      case "cleared":
        this.grant = NO_GRANT;
        return [notice({ kind: "etcdCleared" }), RELEASE];
      case "retaken":
        this.sender.epoch = outcome.epoch;
        this.grant = NO_GRANT;
        this.sender.syncGrant = false;
        return [
          { kind: "adoptEpoch", epoch: outcome.epoch },
          notice({ kind: "keyRetaken", epoch: outcome.epoch }),
          RELEASE,
        ];
      case "resign":
        return [{ kind: "etcd", request: { kind: "resign" } }];
    }
  }

  get etcdMode(): boolean {
    return this.etcd !== undefined;
  }

  /** Whether the record names the standby (etcd mode; peer mode: always). */
  get named(): boolean {
    return this.etcd === undefined || this.sender.syncGrant;
  }

  // ---- what a step-down discards ----

  /** What stepping down now would throw away. */
  soloWork(f: Pick<PrimaryFacts, "applied">): DiscardedWork {
    return soloWork(this.solo, this.work(f));
  }

  private work(f: Pick<PrimaryFacts, "applied">): WorkCounters {
    return { lastSeq: this.log.lastSeq, ...f.applied };
  }

  /** The send time of the newest acknowledged heartbeat, on either carrier; 0 when none. */
  private ackedHeartbeatMs(f: PrimaryFacts): number {
    return Math.max(this.sender.ackedHeartbeatUs / 1000, f.leaseThreadAckedMs ?? 0);
  }

  /**
   * Peer mode: grants the standby once it has everything released; revokes the grant once a
   * snapshot has replaced its state or while serving alone (stepGrant).
   */
  private stepGrant(f: PrimaryFacts): PrimaryAction[] {
    const s = this.sender;
    const next = stepGrant(this.grant, {
      ...this.releaseView(f),
      releasedSeq: f.releasedSeq,
      snapshotChunksAcked: s.snapshotProgress?.chunksAcked ?? 0,
      nowUs: Math.round(f.nowMs * 1000),
      echoedUs: s.ackedHeartbeatUs,
    });
    const changed = next.granted !== this.grant.granted;
    this.grant = next;
    if (!changed) return [];
    s.syncGrant = next.granted;
    return [notice({ kind: "grantChanged", granted: next.granted })];
  }

  /**
   * The standby diverged — possibly on an entry it had acknowledged as received, whose reply
   * went out: its grant is revoked at once (it no longer holds what was released, and says
   * so itself). The revocation binds until it echoes a heartbeat sent after it, as a
   * snapshot's does. etcd mode: the record is cleared once the snapshot replaces its state
   * (etcdTick); the diverged standby does not take the key as a granted replica meanwhile.
   */
  private revokeDiverged(nowMs: number): PrimaryAction[] {
    if (!this.grant.granted || this.etcd) return [];
    this.grant = { granted: false, revokedAtUs: Math.round(nowMs * 1000) };
    this.sender.syncGrant = false;
    return [notice({ kind: "grantChanged", granted: false }), RELEASE];
  }

  /** etcd mode: the next request to etcd, if one is due (one at a time). */
  private etcdTick(f: PrimaryFacts): PrimaryAction[] {
    const etcd = this.etcd!;
    const held = f.etcd!;
    if (etcd.busy) return [];
    const s = this.sender;
    let request: EtcdRequest | undefined;
    if (!held.holding) {
      // A switchover gave the key up for the standby: never take it back.
      if (this.switchingOver) return [];
      request = etcd.retake(f.nowMs);
    } else if (f.nowMs >= held.leaseEndMs) {
      return []; // fenced until a keepalive is answered
    } else {
      const epoch = s.epoch;
      const peer = this.options.identity.peerName;
      const replaced = s.state === "snapshot" && (s.snapshotProgress?.chunksAcked ?? 0) > 0;
      if (this.grant.granted && (this.lease !== "leased" || replaced)) {
        s.syncGrant = false;
        request = etcd.begin({ kind: "setReplica", epoch, replica: "", purpose: "clear" });
      } else if (
        !this.grant.granted &&
        this.lease === "leased" && // heartbeats answered: a link that only seems up does not count
        grantDue({ ...this.releaseView(f), releasedSeq: f.releasedSeq })
      ) {
        this.grant = GRANTED; // from now on only what the standby confirms goes out
        request = etcd.begin({ kind: "setReplica", epoch, replica: peer, purpose: "name" });
      } else if (this.grant.granted && !s.syncGrant && this.lease === "leased") {
        // an earlier write failed
        request = etcd.begin({ kind: "setReplica", epoch, replica: peer, purpose: "name" });
      }
    }
    return request ? [{ kind: "etcd", request }] : [];
  }
}

const RELEASE: PrimaryAction = { kind: "release" };

function notice(n: PrimaryNotice): PrimaryAction {
  return { kind: "notice", notice: n };
}

function linkState(s: Sender): StandbyLinkState {
  return s.state === "streaming" ? "streaming" : s.state === "snapshot" ? "snapshot" : "down";
}
