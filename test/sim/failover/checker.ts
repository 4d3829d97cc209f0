// The failover simulator's safety checks, made while faults happen, and the final checks once
// the pair has settled. It watches what a node can never take back — replies released to
// guests, epochs persisted, messages sent, states thrown away — and judges them against the
// design's promises:
//
// - Epochs only grow on each node, and whatever a node sends as primary (to its standby, to
//   guests) carries an epoch it has persisted.
// - The lease: a standby takes over on lease expiry only once the old primary's lease is over
//   by its own clock, and no primary acknowledges after a primary of a newer claim (higher
//   epoch; a tie by node id) has begun to — except a primary serving alone (degraded) in peer
//   mode after a partition or a lost message: the split brain the design allows.
// - What a primary reports discarded when it steps down equals the replies it released while
//   serving alone (soloWork).
// - Where each released reply's frame is held (the live states' session tables). When a state
//   goes, the frames no longer held anywhere are lost, and judged then: a discarding step-down
//   may lose only the replies it released serving alone after a network failure (split brain);
//   a crash may lose what only it held when its peer was no eligible replica (sync: the peer
//   was empty, resyncing, or not granted — two failures, or a primary already alone), and
//   (peer mode) the replies it released serving alone after a network failure; async
//   may lose anything a failover takes. Nothing else may go missing: at the end every frame a
//   guest was told of is in the history or was lost so.
// - At the end: one primary and an in-sync standby with equal digests and identical lineages;
//   each session's frames are in the history once each and in order; the history replayed on a
//   fresh model from the guests' own frames gives the same state and the very results the
//   guests were told; every guest finished, or failed because its acknowledged frames or its
//   session were lost as above.
import { isDeepStrictEqual } from "node:util";
import {
  type CallResult,
  type DiscardedWork,
  type Entry,
  ErrorCode,
  type Frame,
  otherPrimaryWins,
} from "@vgpu-ha/common";
import { Backend, type BackendOptions, computeDigest } from "@vgpu-ha/gpu-model";
import type { Released } from "@vgpu-ha/primary";
import type { SimGuest } from "./guest-app.js";
import type { FailoverParams, NodeName } from "./params.js";
import type { SimPrimary } from "./primary-host.js";
import type { FailoverStats } from "./stats.js";
import { SimFailure, type World } from "./world.js";

/** Who released a reply: for the checker, never read by the guest's protocol logic. */
export interface ReleaseTag {
  /** The primary role instance (one per node, epoch and promotion). */
  readonly tenure: number;
  /** Counts the tenure's stretches without the lease: the solo period it was released in. */
  readonly soloPeriod: number;
  /** Released while serving alone (degraded). */
  readonly degraded: boolean;
  /** A partition or a lost message had happened by then (split brain is allowed after). */
  readonly excused: boolean;
}

interface Tenure {
  readonly id: number;
  readonly node: NodeName;
  readonly epoch: number;
  firstReleaseMs: number | undefined;
  soloPeriod: number;
  /** Replies released while degraded in the current solo period. */
  soloAcks: number;
  ended: "discarded" | "kept" | "crashed" | undefined;
  splitBrain: boolean;
}

interface Reference {
  readonly backend: Backend;
  /** Each frame's result in the history, by `session#frame`. */
  readonly results: Map<string, CallResult>;
  /** Each session's last frame in the history. */
  readonly lastFrame: Map<string, number>;
}

interface Acked {
  readonly result: CallResult;
  readonly tag: ReleaseTag;
}

export interface GuestRecord {
  readonly guest: SimGuest;
  /** The guest's own frames by number (what the reference replays). */
  readonly frames: ReadonlyMap<number, Frame>;
  readonly acked: Map<number, Acked>;
}

/** What the checker needs to know of the pair at a given moment. */
export interface PairView {
  /** The node's primary role, when it runs one (paused or not). */
  primaryOf(node: NodeName): SimPrimary | undefined;
  /** etcd mode: who holds the leader key at etcd now. */
  etcdLeader(): { nodeId: string; epoch: number } | undefined;
  /** The usable states of live (running or paused) processes: primaries and replicas. */
  liveStates(): readonly Backend[];
  /** Whether this node is a standby holding an eligible (granted) replica. */
  eligible(node: NodeName): boolean;
  /**
   * The frames (`session#n`) and sessions (`session#open`) the standby whose replica is
   * `backend` received and holds for its primary's device: its, though not yet applied.
   */
  heldFrames(backend: Backend): ReadonlySet<string>;
}

type LossReason =
  | "solo work discarded"
  | "snapshot replacing a replica"
  | "crash"
  | "async failover";

export class Checker {
  private readonly world: World;
  private readonly params: FailoverParams;
  private readonly stats: FailoverStats;
  pair: PairView | undefined;
  private readonly tenures = new Map<number, Tenure>();
  private nextTenure = 1;
  /** A partition began or a message was lost (peer mode allows split brain after that). */
  private excuseSinceMs: number | undefined;
  /** Every reply released with a seq to wait for, by `session#frame` / `session#open`. */
  private readonly releases = new Map<string, ReleaseTag[]>();
  /** Released replies whose frame no live state holds any more, and why that was allowed. */
  private readonly lost = new Map<string, LossReason>();
  /** The highest epoch of a node that crashed holding the frame, by key. */
  private readonly crashedHolder = new Map<string, number>();
  readonly guests = new Map<SimGuest, GuestRecord>();
  /** The tag of each reply message a primary sent (the guest service's onReply hook). */
  private readonly replyTags = new WeakMap<object, ReleaseTag>();

  constructor(world: World, params: FailoverParams, stats: FailoverStats) {
    this.world = world;
    this.params = params;
    this.stats = stats;
  }

  private fail(what: string): never {
    throw new SimFailure(what);
  }

  /** The network failed in a way two hosts cannot tell from a dead peer. */
  networkFailed(): void {
    this.excuseSinceMs ??= this.world.nowMs;
  }

  get excused(): boolean {
    return this.excuseSinceMs !== undefined;
  }

  // ---- epochs ----

  epochPersisted(node: NodeName, before: number, after: number): void {
    if (after < before) this.fail(`${node} persisted epoch ${after} over ${before}`);
  }

  sent(node: NodeName, epoch: number, persisted: number): void {
    if (epoch > persisted) {
      this.fail(`${node} sent epoch ${epoch} before persisting it (file holds ${persisted})`);
    }
  }

  // ---- primary tenures and what they release ----

  newTenure(): number {
    return this.nextTenure++;
  }

  tenureStarted(p: SimPrimary): void {
    this.tenures.set(p.tenure, {
      id: p.tenure,
      node: p.deps.node,
      epoch: p.epochAtStart,
      firstReleaseMs: undefined,
      soloPeriod: 0,
      soloAcks: 0,
      ended: undefined,
      splitBrain: false,
    });
  }

  private tenure(id: number): Tenure {
    return this.tenures.get(id) ?? this.fail(`unknown tenure ${id}`);
  }

  /**
   * A standby took over because the lease expired: the old primary, wherever it is (running,
   * paused, cut off), must hold no lease by its own clock.
   */
  promotedOnExpiry(node: NodeName, old: SimPrimary | undefined): void {
    if (old === undefined || !old.deps.proc.alive) return;
    if (old.effectiveLease() === "leased") {
      this.fail(
        `${node} took over while ${old.deps.node} (epoch ${old.epochAtStart}) still held its lease by its own clock`,
      );
    }
  }

  leaseStep(p: SimPrimary, lease: string): void {
    const t = this.tenure(p.tenure);
    if (lease === "leased") {
      t.soloPeriod++;
      t.soloAcks = 0;
    }
  }

  /** A primary's reply left with this tag: what the guest settles from it was released so. */
  tagReply(message: object, tag: ReleaseTag): void {
    this.replyTags.set(message, tag);
  }

  /** The tag of a reply message, as its primary released it. */
  tagOf(message: object): ReleaseTag {
    const tag = this.replyTags.get(message);
    if (tag === undefined) this.fail("a guest settled a frame from a reply no primary sent");
    return tag;
  }

  released(p: SimPrimary, released: readonly Released[]): void {
    const t = this.tenure(p.tenure);
    const self = { epoch: t.epoch, nodeId: t.node };
    // Never two primaries that may both acknowledge now (each by its own clock).
    const other = this.pair!.primaryOf(t.node === "a" ? "b" : "a");
    if (other && other.effectiveLease() === "leased" && p.effectiveLease() === "leased") {
      this.fail(
        `${t.node} (epoch ${t.epoch}) acknowledged while ${other.deps.node} (epoch ${other.epochAtStart}) also holds a lease`,
      );
    }
    for (const other of this.tenures.values()) {
      if (other.node === t.node || other.firstReleaseMs === undefined) continue;
      if (!otherPrimaryWins(self, { epoch: other.epoch, nodeId: other.node })) continue;
      // Peer mode allows the split brain of a primary serving alone after a network failure;
      // etcd mode allows none.
      const peerSplitBrain = this.params.leaseMode === "peer" && p.lease === "degraded";
      if (!(peerSplitBrain && this.excused)) {
        this.fail(
          `${t.node} (epoch ${t.epoch}, ${p.lease}) acknowledged ${released.length} replies after ${other.node} (epoch ${other.epoch}) began acknowledging at t=${other.firstReleaseMs.toFixed(3)}`,
        );
      }
      if (!t.splitBrain) this.stats.splitBrains++;
      t.splitBrain = true;
    }
    t.firstReleaseMs ??= this.world.nowMs;
    if (this.params.leaseMode === "etcd") this.checkEtcdLeader(p);
    const tag = p.tag();
    let frames = 0;
    for (const r of released) {
      if (r.frame > 0) frames++;
      if (r.seq === 0) continue; // a rejected frame: it changed nothing
      const key = `${r.sessionId}#${r.frame === 0 ? "open" : r.frame}`;
      const tags = this.releases.get(key);
      if (tags) tags.push(tag);
      else this.releases.set(key, [tag]);
    }
    // The role's solo mark is set while its peer lease is not held (soloWork counts from it).
    if (p.lease !== "leased") t.soloAcks += frames;
  }

  /** etcd mode: a primary acknowledging holds the leader key at etcd right now. */
  private checkEtcdLeader(p: SimPrimary): void {
    const leader = this.pair!.etcdLeader();
    if (leader?.nodeId !== p.deps.node || leader.epoch !== p.deps.supervisor.epoch()) {
      this.fail(
        `etcd: ${p.deps.node} (epoch ${p.deps.supervisor.epoch()}) acknowledged while the leader key is ${leader ? `${leader.nodeId}'s (epoch ${leader.epoch})` : "free"}`,
      );
    }
  }

  steppedDown(p: SimPrimary, discarded: DiscardedWork, kept: boolean): void {
    const t = this.tenure(p.tenure);
    t.ended = kept ? "kept" : "discarded";
    const solo = p.lease === "leased" ? 0 : t.soloAcks;
    if (discarded.acknowledgedFrames !== (kept ? 0 : solo)) {
      this.fail(
        `${t.node} stepped down reporting ${discarded.acknowledgedFrames} acknowledged frames discarded; it released ${solo} while serving alone${kept ? " (and kept its state)" : ""}`,
      );
    }
    this.stats.discardedAckedFrames += discarded.acknowledgedFrames;
    if (discarded.acknowledgedFrames > 0) this.stats.soloWorkDiscarded++;
    if (t.splitBrain && !kept) this.stats.splitBrainsHealed++;
    if (kept) return;
    // What goes with its state: the replies it released serving alone after the network
    // failed (peer split brain), or a stale copy of what a newer epoch held and lost in a crash.
    let soloFrames = 0;
    this.stateGone(t.node, [p.backend], "solo work discarded", (tags, key) => {
      const solo = this.releasedAlone(t, tags);
      if (solo && !key.endsWith("#open")) soloFrames++;
      if (solo) return true;
      const superseded = (this.crashedHolder.get(key) ?? 0) > t.epoch;
      if (superseded) this.stats.supersededLoss++;
      return superseded;
    });
    if (soloFrames > discarded.acknowledgedFrames) {
      this.fail(
        `${t.node} lost ${soloFrames} frames it acknowledged alone stepping down but reported ${discarded.acknowledgedFrames}`,
      );
    }
  }

  crashed(
    node: NodeName,
    epoch: number,
    held: readonly Backend[],
    primary: SimPrimary | undefined,
  ): void {
    if (primary !== undefined) this.tenure(primary.tenure).ended = "crashed";
    const holding = this.holdsIn(held);
    for (const key of this.releases.keys()) {
      if (!holding(key)) continue;
      this.crashedHolder.set(key, Math.max(epoch, this.crashedHolder.get(key) ?? 0));
    }
    // What only this node held is gone: allowed when its peer could not have taken over, and
    // (peer mode) for the replies it released serving alone after the network failed — its
    // solo work, which the heal would have discarded all the same (the split brain the design
    // allows: failover seed 2060, a degraded primary crashed while its granted standby, cut
    // off, was taking over).
    const peerEligible = this.pair!.eligible(node === "a" ? "b" : "a");
    const t = primary === undefined ? undefined : this.tenure(primary.tenure);
    const solo = (tags: readonly ReleaseTag[]) => t !== undefined && this.releasedAlone(t, tags);
    const lost = this.stateGone(node, held, "crash", (tags) => !peerEligible || solo(tags));
    for (const key of lost) {
      const solo = this.releases.get(key)!.some((g) => g.degraded);
      if (solo) this.stats.unreportedSoloLoss++;
    }
  }

  /**
   * Peer mode: a reply tenure `t` released serving alone (degraded) after the network failed,
   * in its current stretch without the lease — solo work, which the split brain may lose.
   */
  private releasedAlone(t: Tenure, tags: readonly ReleaseTag[]): boolean {
    if (this.params.leaseMode !== "peer") return false;
    return tags.some(
      (g) => g.tenure === t.id && g.degraded && g.excused && g.soloPeriod === t.soloPeriod,
    );
  }

  /**
   * `node`'s state is gone: every released frame no live state holds any more is lost now,
   * which `allowed` (or async mode) must permit. Returns the keys lost.
   */
  private stateGone(
    node: NodeName,
    gone: readonly Backend[],
    reason: LossReason,
    allowed: (tags: readonly ReleaseTag[], key: string) => boolean,
  ): string[] {
    const live = this.holdsIn(this.pair!.liveStates().filter((b) => !gone.includes(b)));
    const lost: string[] = [];
    for (const [key, tags] of this.releases) {
      if (this.lost.has(key)) continue;
      if (live(key)) continue;
      const ok = this.params.ackMode === "async" || allowed(tags, key);
      if (!ok) {
        const t = tags.map((g) => `tenure ${g.tenure}${g.degraded ? " degraded" : " leased"}`);
        this.fail(
          `${reason} on ${node} lost ${key}, acknowledged by ${t.join(", ")}, held nowhere else`,
        );
      }
      this.lost.set(key, this.params.ackMode === "async" ? "async failover" : reason);
      lost.push(key);
    }
    return lost;
  }

  /** Whether any of these states holds a key: applied, or received and held by a standby. */
  private holdsIn(states: readonly Backend[]): (key: string) => boolean {
    const held = states.map((b) => this.pair!.heldFrames(b));
    return (key) => states.some((b) => holds(b, key)) || held.some((h) => h.has(key));
  }

  /**
   * A standby installed a snapshot: its previous replica is gone. Frames only it held may go
   * only as a stale copy of what a newer epoch lost in a crash (or in async mode).
   */
  replaced(node: NodeName, old: Backend, epoch: number): void {
    this.stateGone(node, [old], "snapshot replacing a replica", (_tags, key) => {
      const superseded = (this.crashedHolder.get(key) ?? 0) > epoch;
      if (superseded) this.stats.supersededLoss++;
      return superseded;
    });
  }

  // ---- guests ----

  guestSettled(record: GuestRecord, frame: number, result: CallResult, tag: ReleaseTag): void {
    record.acked.set(frame, { result, tag });
    this.stats.framesAcked++;
    const f = record.frames.get(frame);
    if (
      f?.body.kind === "call" &&
      f.body.call.op === "kernelLaunch" &&
      f.body.call.kernel === "increment_u32" &&
      result.code === ErrorCode.OK
    ) {
      this.stats.incrementsAcked++;
    }
  }

  // ---- the end ----

  /**
   * The final checks on a settled pair: `history` is the final primary's lineage, `replica` the
   * standby's, `primary` and `standby` their states.
   */
  finalChecks(
    history: readonly Entry[],
    replica: readonly Entry[],
    primary: Backend,
    standby: Backend,
    referenceOptions: BackendOptions,
  ): void {
    // Each the object appended, or (resent from the retained log's bytes) an equal one.
    const same = (e: Entry, i: number) => e === history[i] || isDeepStrictEqual(e, history[i]);
    if (replica.length !== history.length || !replica.every(same)) {
      this.fail(
        `the standby's history (${replica.length} entries) is not the primary's (${history.length})`,
      );
    }
    const mine = computeDigest(primary);
    const theirs = computeDigest(standby);
    if (mine.state !== theirs.state) {
      this.fail(
        `replicas differ at seq ${history.length}: ${mine.gpu !== theirs.gpu ? "GPU state" : "session table"}`,
      );
    }
    const reference = this.replay(history, referenceOptions);
    if (computeDigest(reference.backend).state !== mine.state) {
      this.fail("the final state is not the replay of its history from the guests' own frames");
    }
    this.checkGuests(reference);
  }

  /** Replays the history on a fresh model from the guests' frames; each frame exactly once. */
  private replay(history: readonly Entry[], options: BackendOptions): Reference {
    const backend = new Backend({ ...options, trackMmio: false });
    const results = new Map<string, CallResult>();
    const lastFrame = new Map<string, number>();
    const bySession = new Map<string, GuestRecord>();
    for (const r of this.guests.values()) {
      if (r.guest.sessionId !== undefined) bySession.set(r.guest.sessionId, r);
    }
    const apply = (sessionId: string, number: number, seq: number) => {
      const session =
        backend.sessions.get(sessionId) ??
        this.fail(`seq ${seq}: frame of unknown session ${sessionId}`);
      const frame = bySession.get(sessionId)?.frames.get(number);
      if (frame === undefined) {
        this.fail(`seq ${seq}: frame ${number} of ${sessionId} that no guest sent`);
      }
      const expected = (lastFrame.get(sessionId) ?? 0) + 1;
      if (number !== expected) {
        const what = number < expected ? "applied twice" : "a gap";
        this.fail(`seq ${seq}: ${sessionId} frame ${number} after ${expected - 1} (${what})`);
      }
      const outcome = backend.applyFrame(session, frame);
      if (outcome.kind !== "applied") {
        this.fail(`seq ${seq}: reference ${outcome.kind} frame ${number} of ${sessionId}`);
      }
      lastFrame.set(sessionId, number);
      results.set(`${sessionId}#${number}`, outcome.result);
    };
    for (const entry of history) {
      const b = entry.body;
      switch (b.kind) {
        case "sessionOpen": {
          if (backend.sessions.has(b.sessionId)) {
            this.fail(`seq ${entry.seq}: session ${b.sessionId} opened twice`);
          }
          const opened = backend.openSession(b.sessionId, b.tenant);
          if ("code" in opened) this.fail(`seq ${entry.seq}: reference refused ${b.sessionId}`);
          break;
        }
        case "sessionClose":
          backend.closeSession(b.sessionId, b.reason);
          break;
        case "call":
          apply(b.sessionId, b.frame, entry.seq);
          break;
        case "mmioPages":
        case "mmioStore":
          for (const f of b.frames) apply(f.sessionId, f.frame, entry.seq);
          break;
        case "checkpoint":
          break;
      }
    }
    return { backend, results, lastFrame };
  }

  private checkGuests(reference: Reference): void {
    for (const r of this.guests.values()) {
      const g = r.guest;
      const name = g.options.name;
      const id = g.sessionId;
      let lost = 0;
      for (const [frame, acked] of r.acked) {
        const key = `${id}#${frame}`;
        const result = reference.results.get(key);
        if (result === undefined) {
          if (!this.lost.has(key)) {
            this.fail(
              `${name}: frame ${frame} of ${id} was acknowledged (tenure ${acked.tag.tenure}, ${acked.tag.degraded ? "degraded" : "leased"}) and is missing, though no state holding it was lost`,
            );
          }
          lost++;
          continue;
        }
        if (!sameResult(result, acked.result)) {
          this.fail(
            `${name}: frame ${frame} of ${id}: the guest was told ${ErrorCode[acked.result.code]}, the history gives ${ErrorCode[result.code]} (or another output)`,
          );
        }
      }
      this.stats.lostAckedFrames += lost;
      const failure = g.failure;
      if (failure === undefined) {
        if (g.unsettled > 0) this.fail(`${name} has ${g.unsettled} frames unanswered at the end`);
        continue;
      }
      this.stats.guestsFailed++;
      const sessionLost =
        id !== undefined && !reference.backend.sessions.has(id) && this.lost.has(`${id}#open`);
      const explained =
        (failure.code === ErrorCode.FRAME_OUT_OF_ORDER && lost > 0) ||
        (failure.code === ErrorCode.UNKNOWN_SESSION && sessionLost);
      if (!explained) {
        this.fail(
          `${name} failed: ${ErrorCode[failure.code]} ${failure.message} (lost ${lost} acknowledged frames${sessionLost ? ", and its session" : ""})`,
        );
      }
    }
  }
}

/**
 * Whether a state holds a frame (`session#n`) or a session (`session#open`): its session table
 * says so — frames apply in order, and the table is part of the replicated state.
 */
function holds(backend: Backend, key: string): boolean {
  const at = key.lastIndexOf("#");
  const session = backend.sessions.get(key.slice(0, at));
  if (session === undefined) return false;
  const what = key.slice(at + 1);
  return what === "open" || session.lastFrame >= Number(what);
}

function sameResult(a: CallResult, b: CallResult): boolean {
  if (a.code !== b.code || a.output.kind !== b.output.kind) return false;
  const x = a.output;
  const y = b.output;
  if (x.kind === "handle" && y.kind === "handle") return x.handle === y.handle;
  if (x.kind === "fence" && y.kind === "fence") return x.value === y.value;
  if (x.kind === "data" && y.kind === "data") {
    return Buffer.from(x.data).equals(Buffer.from(y.data));
  }
  return true;
}
