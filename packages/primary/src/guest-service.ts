// The guest service: one gRPC bidirectional stream per session. Opens or resumes the session,
// applies each frame through the sequencer (which logs it for the standby), and answers with
// Acks: cumulative acknowledgement plus one result per frame. A reply is released only once
// the standby has applied the frame's entry when the node says so (sync mode), so a guest is
// never told about anything a failover could lose.
//
// Fairness: what arrives is queued per stream and served in short slices, the tenant that has
// used the least service time first (core/fair-queue.ts); a stream with work waiting is not
// read further (gRPC flow control holds its sender back). So a tenant flooding the node — with
// valid frames or refused ones — gets its share of the event loop and no more, and another
// tenant's frames wait at most about one slice. Streams without a session yet share one key.
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import type * as grpc from "@grpc/grpc-js";
import {
  type CallResult,
  certificateNames,
  decodeFrame,
  ErrorCode,
  encodeFrameResult,
  errorName,
  type Logger,
  MalformedError,
  type NodeMetrics,
  type ServiceHandlers,
  wire,
} from "@vgpu-ha/common";
import { FairQueue } from "./core/fair-queue.js";
import { FirstMessageDeadlines } from "./core/guest-guard.js";
import type { IdleSessions } from "./core/idle-sessions.js";
import type { Sequencer } from "./core/sequencer.js";
import type { SessionAdmission } from "./core/session-admission.js";
import { TokenBucket } from "./core/token-bucket.js";
import type { TenantAuth } from "./tenant-auth.js";

type Stream = grpc.ServerDuplexStream<wire.GuestMessage, wire.NodeMessage>;
type Session = NonNullable<ReturnType<Sequencer["backend"]["sessions"]["get"]>>;

export interface GuestServiceDeps {
  readonly sequencer: Sequencer;
  readonly auth: TenantAuth;
  /** Limits on new sessions (counts and rate); none: unlimited. */
  readonly admission?: SessionAdmission;
  /**
   * Refused frames a tenant may cause per second (and in a burst): past them its streams wait
   * for the budget to refill before more of its frames are read. None: unlimited.
   */
  readonly refusals?: { readonly perSecond: number; readonly burst: number };
  /** Monotonic milliseconds (refusal budget, idle sessions); default performance.now. */
  readonly nowMs?: () => number;
  /** Which sessions have no stream attached, and since when (the idle reaper's rule). */
  readonly idle?: IdleSessions;
  readonly metrics: NodeMetrics;
  readonly log: Logger;
  readonly nodeId: string;
  readonly epoch: () => number;
  /** Frames a session may have sent and not had answered yet. */
  readonly maxFramesInFlight: number;
  /** Largest gRPC message: replies are split so no Acks message exceeds half of it. */
  readonly maxMessageBytes: number;
  /** Whether this node serves guests now; when not, streams get NOT_PRIMARY. */
  readonly serving: () => boolean;
  /**
   * Replies whose seq is at most this may go out: the seq the standby has applied (sync mode),
   * -1 to hold every reply (a primary without its lease), undefined to release at once.
   */
  readonly replicatedSeq: () => number | undefined;
  /** Called after each guest message was applied (to schedule MMIO flush and sending). */
  readonly afterApply?: () => void;
  /** Where guests should go instead, for NOT_PRIMARY. */
  readonly redirect?: () => string;
  /** This node's cluster id: an Open naming another one is answered WRONG_CLUSTER. */
  readonly clusterId?: string;
  /** A stream that sends no first message for this long is closed; none: never. */
  readonly openTimeoutMs?: number;
  /** Told of each guest refused for an open timeout, failed authentication or wrong cluster. */
  readonly onRefused?: (reason: GuestServiceRefusal, refusal: GuestRefusalInfo) => void;
}

export type GuestServiceRefusal = "open_timeout" | "auth" | "wrong_cluster";

export interface GuestRefusalInfo {
  /** ip:port of the guest's connection. */
  readonly remote: string;
  /** The tenant name as the guest gave it. */
  readonly tenant?: string;
}

/**
 * One slice of service: frames are applied until it has taken this long (at least one). 0.2 ms
 * slices (0.5 ms turns) were measured to cut a single session's call rate by half: the reply
 * batches got small and the turns many. 2 ms keeps another tenant's wait short.
 */
const SLICE_MS = 2;
/** The service runs slices for this long, then lets the event loop read sockets again. */
const TURN_MS = 5;
/** Messages queued on one stream past which it is not read (see updateFlow). */
const QUEUE_PAUSE = 32;
const QUEUE_RESUME = 8;
/** A tenant out of refusal budget waits until it has this long's worth of it again. */
const REFILL_BATCH_MS = 50;
/** Longest tenant name a refusal reports (the name is the guest's, unchecked). */
const REPORTED_TENANT_CHARS = 128;
/** The fair-queue key of streams whose session is not open yet. */
const UNOPENED = "";

/** A message received and not yet served (or a refusal to send in its turn). */
type Pending =
  | { readonly kind: "message"; readonly message: wire.GuestMessage }
  | { readonly kind: "refuse"; readonly code: ErrorCode; readonly text: string };

interface Held {
  readonly frame: number;
  readonly seq: number;
  readonly result: wire.FrameResult;
}

/** One guest stream: its session and the replies waiting for replication. */
interface StreamState {
  readonly stream: Stream;
  /** The names of the stream's verified TLS client certificate (none on plaintext). */
  readonly certificateNames: readonly string[];
  session: Session | undefined;
  /** The Opened reply, held until the session-open entry is replicated. */
  opened: { seq: number; message: wire.NodeMessage } | undefined;
  readonly held: Held[];
  /** After a Close: the seq of the close entry; Closed goes out once it is replicated. */
  closing: number | undefined;
  /** Received, not served yet, in order; the first Frames message may be partly served. */
  readonly queue: Pending[];
  /** Frames of the first queued message already served. */
  served: number;
  /** Frames received and not served yet (they count as in flight). */
  queuedFrames: number;
  /** Waiting in the fair queue. */
  scheduled: boolean;
  /** The guest half-closed: end the stream once its queue is served. */
  ended: boolean;
}

export class GuestService {
  private readonly deps: GuestServiceDeps;
  private readonly states = new Set<StreamState>();
  /** The live stream of each session; a resume elsewhere ends the older one. */
  private readonly bySession = new Map<string, StreamState>();
  private paused = false;
  /** Streams with work waiting, by tenant. */
  private readonly fair = new FairQueue<StreamState>();
  private turnScheduled = false;
  /** Each tenant's budget of refused frames. */
  private readonly refusalBudgets = new Map<string, TokenBucket>();
  /** Streams of tenants out of refusal budget, waiting for it to refill. */
  private readonly parked = new Map<string, StreamState[]>();
  private parkTimer: NodeJS.Timeout | undefined;
  /** Streams that have sent nothing yet, closed after deps.openTimeoutMs. */
  private readonly firstMessage: FirstMessageDeadlines<StreamState> | undefined;
  private openTimer: NodeJS.Timeout | undefined;

  /** Highest frame acknowledged to a guest, by seq: for status (acknowledged seq). */
  ackedSeq = 0;
  /** The highest seq any reply (an ack, a session opened or closed) went out for. */
  releasedSeq = 0;
  /** Frames applied, replies sent and sessions opened (for what a primary would discard). */
  readonly applied = { frames: 0, acknowledged: 0, sessions: 0 };

  constructor(deps: GuestServiceDeps) {
    this.deps = deps;
    this.firstMessage =
      deps.openTimeoutMs !== undefined ? new FirstMessageDeadlines(deps.openTimeoutMs) : undefined;
  }

  /** Work received and not served yet (waiting for a turn or for a tenant's budget). */
  get busy(): boolean {
    return this.turnScheduled || this.parkTimer !== undefined;
  }

  get openStreams(): number {
    return this.bySession.size;
  }

  /** Replies waiting for the standby. */
  get heldReplies(): number {
    let n = 0;
    for (const s of this.states) n += s.held.length;
    return n;
  }

  handlers(): ServiceHandlers<typeof wire.Guest> {
    return { session: (stream) => this.serve(stream) };
  }

  /** Stops (or resumes) reading guest streams: back-pressure while the standby lags. */
  setPaused(paused: boolean): void {
    if (paused === this.paused) return;
    this.paused = paused;
    for (const s of this.states) this.updateFlow(s);
  }

  /** A stream flows unless the node holds guests back or it has work waiting. */
  /**
   * Stops reading a stream whose queue has grown past QUEUE_PAUSE messages (its tenant gets
   * its turns; the rest waits in the socket), reads it again once it is down to QUEUE_RESUME.
   * Pausing on every queued message instead cost a pause/resume round per message and cut a
   * single session's call rate by four.
   */
  private updateFlow(state: StreamState): void {
    const n = state.queue.length;
    if (this.paused || n > QUEUE_PAUSE) state.stream.pause();
    else if (n <= QUEUE_RESUME) state.stream.resume();
  }

  /** Sends every held reply whose entry the standby has now applied. */
  release(): void {
    for (const s of this.states) this.flush(s);
  }

  /** Ends every stream with NOT_PRIMARY (shutdown or loss of the role); held replies are dropped. */
  endAll(message: string): void {
    for (const s of [...this.states]) {
      s.held.length = 0;
      s.queue.length = 0;
      this.sessionError(s, ErrorCode.NOT_PRIMARY, message, this.deps.redirect?.() ?? "");
    }
    this.states.clear();
    this.bySession.clear();
    this.fair.remove(() => true);
    this.parked.clear();
    clearTimeout(this.parkTimer);
    this.parkTimer = undefined;
    this.firstMessage?.expired(Number.POSITIVE_INFINITY);
    clearTimeout(this.openTimer);
    this.openTimer = undefined;
  }

  /** Serves one guest stream. */
  serve(stream: Stream): void {
    const state: StreamState = {
      stream,
      certificateNames: clientCertificateNames(stream),
      session: undefined,
      opened: undefined,
      held: [],
      closing: undefined,
      queue: [],
      served: 0,
      queuedFrames: 0,
      scheduled: false,
      ended: false,
    };
    this.states.add(state);
    if (this.firstMessage) {
      this.firstMessage.add(state, this.now());
      this.armOpenTimer();
    }
    stream.on("data", (message: wire.GuestMessage) => this.receive(state, message));
    // A stream handed over paused (parked during a promotion) flows once this service may read.
    this.updateFlow(state);
    const forget = () => this.forget(state);
    stream.on("error", forget);
    stream.on("cancelled", forget);
    stream.on("end", () => {
      state.ended = true;
      if (state.queue.length === 0) this.finishEnded(state);
    });
  }

  /** The guest half-closed and everything it sent was served. */
  private finishEnded(state: StreamState): void {
    this.forget(state);
    state.stream.end();
  }

  /**
   * Queues a message for its stream, then serves at once if nothing else waits; otherwise it
   * waits for its turn. The frames limit is judged on arrival, and refused in order.
   */
  private receive(state: StreamState, message: wire.GuestMessage): void {
    if (!this.states.has(state)) return;
    this.firstMessage?.remove(state);
    if (message.kind.case === "frames") {
      const n = message.kind.value.frames.length;
      const unanswered = state.held.length + state.queuedFrames + n;
      if (unanswered > this.deps.maxFramesInFlight) {
        state.queue.push({
          kind: "refuse",
          code: ErrorCode.LIMIT_EXCEEDED,
          text: `${unanswered} frames unanswered, limit ${this.deps.maxFramesInFlight}`,
        });
      } else {
        state.queuedFrames += n;
        state.queue.push({ kind: "message", message });
      }
    } else {
      state.queue.push({ kind: "message", message });
    }
    this.schedule(state);
    if (!this.turnScheduled) this.turn();
    if (this.states.has(state)) this.updateFlow(state);
  }

  private schedule(state: StreamState): void {
    if (state.scheduled || state.queue.length === 0) return;
    state.scheduled = true;
    this.fair.push(state.session?.tenant ?? UNOPENED, state);
  }

  /** Serves slices, least-served tenant first, for about TURN_MS; then yields to the loop. */
  private turn(): void {
    this.turnScheduled = false;
    const start = process.hrtime.bigint();
    let served = false;
    for (let next = this.fair.shift(); next; next = this.fair.shift()) {
      const state = next.item;
      if (!this.states.has(state)) {
        state.scheduled = false;
        continue;
      }
      if (next.key !== UNOPENED && this.outOfBudget(next.key)) {
        this.park(next.key, state); // stays scheduled: it waits for its budget
        continue;
      }
      state.scheduled = false;
      const t0 = process.hrtime.bigint();
      this.serveSlice(state);
      served = true;
      this.fair.charge(next.key, Number(process.hrtime.bigint() - t0) / 1e6);
      if (this.states.has(state)) {
        if (state.queue.length > 0) this.schedule(state);
        else if (state.ended) this.finishEnded(state);
        else this.updateFlow(state);
      }
      if (Number(process.hrtime.bigint() - start) / 1e6 >= TURN_MS) break;
    }
    if (served) this.deps.afterApply?.();
    if (!this.fair.empty && !this.turnScheduled) {
      this.turnScheduled = true;
      setImmediate(() => this.turn());
    }
  }

  private now(): number {
    return this.deps.nowMs?.() ?? performance.now();
  }

  private budgetOf(tenant: string): TokenBucket | undefined {
    const r = this.deps.refusals;
    if (r === undefined) return undefined;
    let b = this.refusalBudgets.get(tenant);
    if (b === undefined) {
      b = new TokenBucket(r.perSecond, r.burst, this.now());
      this.refusalBudgets.set(tenant, b);
    }
    return b;
  }

  /** Refusals a parked tenant waits for (REFILL_BATCH_MS worth), so it wakes rarely. */
  private batch(): number {
    return Math.max(1, Math.ceil(((this.deps.refusals?.perSecond ?? 0) * REFILL_BATCH_MS) / 1000));
  }

  private outOfBudget(tenant: string): boolean {
    const b = this.budgetOf(tenant);
    return b !== undefined && !b.has(this.now());
  }

  /** Counts one refused frame; false once the tenant's budget is spent. */
  private takeRefusal(tenant: string): boolean {
    return this.budgetOf(tenant)?.take(this.now()) ?? true;
  }

  /** Holds a stream of an out-of-budget tenant until its budget has a token again. */
  private park(tenant: string, state: StreamState): void {
    const list = this.parked.get(tenant);
    if (list) list.push(state);
    else this.parked.set(tenant, [state]);
    this.armParkTimer();
  }

  private armParkTimer(): void {
    if (this.parkTimer !== undefined || this.parked.size === 0) return;
    let waitMs = Number.POSITIVE_INFINITY;
    for (const tenant of this.parked.keys()) {
      waitMs = Math.min(waitMs, this.budgetOf(tenant)?.waitMs(this.now(), this.batch()) ?? 0);
    }
    this.parkTimer = setTimeout(() => this.unpark(), Math.max(1, Math.ceil(waitMs)));
  }

  private unpark(): void {
    this.parkTimer = undefined;
    for (const [tenant, list] of [...this.parked]) {
      if (!(this.budgetOf(tenant)?.has(this.now(), this.batch()) ?? true)) continue;
      this.parked.delete(tenant);
      for (const state of list) {
        if (this.states.has(state)) this.fair.push(tenant, state);
        else state.scheduled = false;
      }
    }
    this.armParkTimer();
    if (!this.turnScheduled) this.turn();
  }

  /** Serves the stream's first queued message, or SLICE_MS worth of its frames. */
  private serveSlice(state: StreamState): void {
    const pending = state.queue[0]!;
    if (pending.kind === "refuse") {
      this.sessionError(state, pending.code, pending.text);
      return;
    }
    const message = pending.message;
    if (message.kind.case !== "frames") {
      state.queue.shift();
      this.onMessage(state, message);
      return;
    }
    const frames = message.kind.value.frames;
    const from = state.served;
    const to = this.onFrames(state, frames, from);
    state.queuedFrames -= to - from;
    if (to >= frames.length) {
      state.queue.shift();
      state.served = 0;
    } else {
      state.served = to;
    }
  }

  /** When this node does not serve guests now: tells the stream NOT_PRIMARY (with where to go). */
  private refusedNotServing(state: StreamState): boolean {
    if (this.deps.serving()) return false;
    this.sessionError(
      state,
      ErrorCode.NOT_PRIMARY,
      "this node does not serve guests now",
      this.deps.redirect?.() ?? "",
    );
    return true;
  }

  private onMessage(state: StreamState, message: wire.GuestMessage): void {
    if (this.refusedNotServing(state)) return;
    if (state.closing !== undefined) {
      this.sessionError(state, ErrorCode.MALFORMED, "message after Close");
      return;
    }
    const kind = message.kind;
    switch (kind.case) {
      case "open":
        if (state.session !== undefined) {
          this.sessionError(state, ErrorCode.MALFORMED, "session already open on this stream");
          return;
        }
        this.open(state, kind.value);
        break;
      case "close":
        // Closed follows the replies still held, once the close itself is replicated.
        state.closing = 0;
        if (state.session !== undefined) {
          state.closing = this.deps.sequencer.closeSession(state.session.id);
          this.bySession.delete(state.session.id);
          this.deps.idle?.forget(state.session.id);
          this.deps.log.debug({ session: state.session.id }, "session closed");
        }
        this.flush(state);
        break;
      default:
        this.sessionError(state, ErrorCode.MALFORMED, "empty guest message");
        return;
    }
  }

  /**
   * Applies frames[from..] of a Frames message until a slice's time is used (at least one
   * frame); the index after the last one applied.
   */
  private onFrames(state: StreamState, frames: readonly wire.Frame[], from: number): number {
    if (this.refusedNotServing(state)) return frames.length;
    if (state.closing !== undefined) {
      this.sessionError(state, ErrorCode.MALFORMED, "message after Close");
      return frames.length;
    }
    if (state.session === undefined) {
      this.sessionError(state, ErrorCode.MALFORMED, "open the session first");
      return frames.length;
    }
    const end = this.applyFrames(state, state.session, frames, from);
    this.flush(state);
    return end;
  }

  private forget(state: StreamState): void {
    this.states.delete(state);
    this.firstMessage?.remove(state);
    state.queue.length = 0;
    state.queuedFrames = 0;
    const id = state.session?.id;
    if (id !== undefined && this.bySession.get(id) === state) {
      this.bySession.delete(id);
      // Its idle time starts now, unless the session itself is gone.
      if (this.deps.sequencer.backend.sessions.has(id)) this.deps.idle?.detach(id, this.now());
    }
  }

  /**
   * Ends a session its guest did not close (the idle reaper, an operator) through the log, so
   * the standby frees the same contexts, buffers and quota; a stream still attached is told
   * SESSION_EXPIRED (its unanswered frames were applied, and are freed with the session).
   * The close entry's seq and the session's tenant; undefined for no such session.
   */
  endSession(
    id: string,
    reason: "idle" | "operator",
  ): { readonly seq: number; readonly tenant: string } | undefined {
    const session = this.deps.sequencer.backend.sessions.get(id);
    if (session === undefined) return undefined;
    const seq = this.deps.sequencer.closeSession(id, reason);
    this.deps.idle?.forget(id);
    const state = this.bySession.get(id);
    if (state !== undefined) {
      state.held.length = 0;
      this.sessionError(state, ErrorCode.SESSION_EXPIRED, expiredMessage(reason));
    }
    this.deps.afterApply?.();
    return { seq, tenant: session.tenant };
  }

  /**
   * Ends the sessions idle for guest.sessionIdleSeconds (at most `max`, the longest idle
   * first); counts them by tenant and logs one line for all. What was reaped, by tenant.
   */
  reapIdle(max: number): Map<string, number> {
    const byTenant = new Map<string, number>();
    const idle = this.deps.idle;
    if (idle === undefined || idle.idleMs === 0 || !this.deps.serving()) return byTenant;
    const sessions = this.deps.sequencer.backend.sessions;
    const due = idle.tick(sessions.keys(), this.now(), max);
    const ids: string[] = [];
    for (const id of due) {
      const ended = this.endSession(id, "idle");
      if (ended === undefined) continue;
      ids.push(id);
      byTenant.set(ended.tenant, (byTenant.get(ended.tenant) ?? 0) + 1);
      this.deps.metrics.sessionsReaped.inc({ tenant: ended.tenant });
    }
    if (ids.length > 0) {
      this.deps.log.info(
        {
          seq: this.deps.sequencer.log.lastSeq,
          reaped: ids.length,
          byTenant: Object.fromEntries(byTenant),
          idleSeconds: idle.idleMs / 1000,
          sessions: ids.slice(0, REAP_LOG_IDS),
        },
        "idle sessions reaped",
      );
    }
    return byTenant;
  }

  /** Wakes when the oldest stream without a first message is due. */
  private armOpenTimer(): void {
    const due = this.firstMessage?.nextDueMs();
    if (this.openTimer !== undefined || due === undefined) return;
    this.openTimer = setTimeout(
      () => {
        this.openTimer = undefined;
        this.closeSilent();
      },
      Math.max(1, Math.ceil(due - this.now())),
    );
  }

  /** Ends every stream that sent nothing within the open timeout. */
  private closeSilent(): void {
    const timeoutMs = this.firstMessage?.timeoutMs;
    for (const state of this.firstMessage?.expired(this.now()) ?? []) {
      this.refused("open_timeout", state);
      this.sessionError(
        state,
        ErrorCode.LIMIT_EXCEEDED,
        `no Open within ${timeoutMs} ms (guest.openTimeoutMs)`,
      );
    }
    this.armOpenTimer();
  }

  private refused(reason: GuestServiceRefusal, state: StreamState, tenant?: string): void {
    if (this.deps.onRefused === undefined) return;
    this.deps.onRefused(reason, {
      remote: state.stream.getPeer(),
      ...(tenant !== undefined ? { tenant: tenant.slice(0, REPORTED_TENANT_CHARS) } : {}),
    });
  }

  private open(state: StreamState, open: wire.Open): void {
    const { sequencer, auth, metrics, clusterId } = this.deps;
    // Before the credentials: a guest of another cluster must hear so, not UNAUTHENTICATED.
    if (open.clusterId !== "" && clusterId !== undefined && open.clusterId !== clusterId) {
      this.refused("wrong_cluster", state, open.tenant);
      this.sessionError(
        state,
        ErrorCode.WRONG_CLUSTER,
        `this node is not of cluster ${open.clusterId.slice(0, REPORTED_TENANT_CHARS)}`,
      );
      return;
    }
    if (!auth.check(open.tenant, open.token, state.certificateNames)) {
      this.refused("auth", state, open.tenant);
      this.sessionError(state, ErrorCode.UNAUTHENTICATED, "unknown tenant or wrong token");
      return;
    }
    let session: Session | undefined;
    let seq = 0;
    if (open.resumeSessionId !== "") {
      session = sequencer.backend.sessions.get(open.resumeSessionId);
      // Someone else's session is exactly as unknown as a session that never existed.
      if (session === undefined || session.tenant !== open.tenant) {
        const ended = sequencer.backend.ended.get(open.resumeSessionId);
        if (ended !== undefined && ended.tenant === open.tenant) {
          this.sessionError(state, ErrorCode.SESSION_EXPIRED, expiredMessage(ended.reason));
        } else {
          this.sessionError(state, ErrorCode.UNKNOWN_SESSION, "no such session");
        }
        return;
      }
      const older = this.bySession.get(session.id);
      if (older !== undefined && older !== state) {
        this.sessionError(older, ErrorCode.UNKNOWN_SESSION, "session resumed on another stream");
      }
      // Its frames so far may not all be on the standby yet.
      seq = sequencer.log.lastSeq + (sequencer.mmioPending ? 1 : 0);
      metrics.sessionsOpened.inc({ kind: "resume" });
    } else {
      const refused = this.deps.admission?.admit(open.tenant, this.sessionCounts(open.tenant));
      if (refused) {
        this.refuseOpen(state, refused.reason, refused.waitMs);
        return;
      }
      const opened = sequencer.openSession(randomUUID(), open.tenant);
      if ("code" in opened) {
        this.sessionError(state, opened.code, opened.message);
        return;
      }
      session = opened;
      this.applied.sessions++;
      seq = sequencer.log.lastSeq;
      metrics.sessionsOpened.inc({ kind: "new" });
    }
    state.session = session;
    this.bySession.set(session.id, state);
    if (open.resumeSessionId === "") this.deps.idle?.opened(session.id, this.now());
    else this.deps.idle?.attach(session.id);
    this.deps.log.debug({ session: session.id, tenant: session.tenant }, "session opened");
    state.opened = {
      seq,
      message: create(wire.NodeMessageSchema, {
        kind: {
          case: "opened",
          value: {
            sessionId: session.id,
            epoch: BigInt(this.deps.epoch()),
            lastFrame: BigInt(session.lastFrame),
            nodeId: this.deps.nodeId,
          },
        },
      }),
    };
    this.flush(state);
  }

  /**
   * An open above the tenant's rate is answered only when the rate would have let it through
   * (at most a second later): a storm of opens gets its refusals at the rate it is allowed, and
   * each connection holds at most guest.maxStreamsPerConnection of them. Nothing it sends
   * meanwhile is read.
   */
  private refuseOpen(state: StreamState, reason: string, waitMs: number): void {
    if (waitMs <= 0) {
      this.sessionError(state, ErrorCode.LIMIT_EXCEEDED, reason);
      return;
    }
    this.forget(state);
    state.stream.pause();
    const timer = setTimeout(
      () => this.sessionError(state, ErrorCode.LIMIT_EXCEEDED, reason),
      Math.min(1000, waitMs),
    );
    const cancel = () => clearTimeout(timer);
    state.stream.on("error", cancel);
    state.stream.on("cancelled", cancel);
  }

  /** Sessions open on this node (replicated state: a resumed or failed-over one counts). */
  private sessionCounts(tenant: string): { total: number; ofTenant: number } {
    const sessions = this.deps.sequencer.backend.sessions;
    let ofTenant = 0;
    for (const s of sessions.values()) if (s.tenant === tenant) ofTenant++;
    return { total: sessions.size, ofTenant };
  }

  /** Applies frames from `from` for up to SLICE_MS; the index after the last one applied. */
  private applyFrames(
    state: StreamState,
    session: Session,
    frames: readonly wire.Frame[],
    from: number,
  ): number {
    const { sequencer, metrics } = this.deps;
    const until = process.hrtime.bigint() + BigInt(Math.round(SLICE_MS * 1e6));
    let i = from;
    while (i < frames.length && (i === from || process.hrtime.bigint() < until)) {
      const wireFrame = frames[i++]!;
      const frame = decodeFrame(wireFrame);
      if (frame instanceof MalformedError) {
        metrics.callStats.frame("rejected").count++;
        state.held.push({
          frame: session.lastFrame,
          seq: 0,
          result: encodeFrameResult(Number(wireFrame.number), malformedResult(frame)),
        });
        if (!this.takeRefusal(session.tenant)) break;
        continue;
      }
      const started = process.hrtime.bigint();
      const { outcome, seq } = sequencer.applyFrame(session, frame);
      const stats = metrics.callStats;
      stats.frame(outcome.kind).count++;
      if (outcome.kind === "applied") {
        this.applied.frames++;
        const op = frame.body.kind === "call" ? frame.body.call.op : "stores";
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        stats.call(op, errorName(outcome.result.code)).count++;
        stats.duration(op).observe(seconds);
        if (frame.body.kind === "stores" && outcome.result.code === ErrorCode.OK) {
          metrics.mmioStores.inc(frame.body.batch.offsets.length);
        }
      }
      state.held.push({
        frame: session.lastFrame,
        seq,
        result: encodeFrameResult(frame.number, outcome.result),
      });
      // A replayed reply is not counted: a resumed session may re-send many at once.
      const refused = outcome.kind !== "duplicate" && outcome.result.code !== ErrorCode.OK;
      if (refused && !this.takeRefusal(session.tenant)) {
        metrics.refusalThrottles.inc({ tenant: session.tenant });
        break;
      }
    }
    return i;
  }

  /** Writes the Opened reply and the held results that may go out now, in order. */
  private flush(state: StreamState): void {
    const replicated = this.deps.replicatedSeq();
    const ready = (seq: number) => replicated === undefined || seq <= replicated;
    if (state.opened) {
      if (!ready(state.opened.seq)) return;
      state.stream.write(state.opened.message);
      this.releasedSeq = Math.max(this.releasedSeq, state.opened.seq);
      state.opened = undefined;
    }
    let n = 0;
    while (n < state.held.length && ready(state.held[n]!.seq)) n++;
    if (n > 0) this.writeAcks(state, state.held.splice(0, n));
    if (state.closing !== undefined && state.held.length === 0 && ready(state.closing)) {
      this.releasedSeq = Math.max(this.releasedSeq, state.closing);
      state.stream.write(create(wire.NodeMessageSchema, { kind: { case: "closed", value: {} } }));
      state.stream.end();
      this.states.delete(state);
    }
  }

  /** One or more Acks messages, none above half the message limit. */
  private writeAcks(state: StreamState, out: Held[]): void {
    const budget = this.deps.maxMessageBytes / 2;
    let start = 0;
    let bytes = 0;
    for (let i = 0; i <= out.length; i++) {
      const size = i < out.length ? resultBytes(out[i]!.result) : 0;
      if (i === out.length || (i > start && bytes + size > budget)) {
        const part = out.slice(start, i);
        const last = part.at(-1)!;
        this.applied.acknowledged += part.length;
        if (last.seq > this.ackedSeq) this.ackedSeq = last.seq;
        if (last.seq > this.releasedSeq) this.releasedSeq = last.seq;
        state.stream.write(
          create(wire.NodeMessageSchema, {
            kind: {
              case: "acks",
              value: {
                epoch: BigInt(this.deps.epoch()),
                ackedThrough: BigInt(last.frame),
                results: part.map((h) => h.result),
              },
            },
          }),
        );
        start = i;
        bytes = 0;
      }
      bytes += size;
    }
  }

  private sessionError(state: StreamState, code: ErrorCode, message: string, redirect = ""): void {
    this.deps.metrics.sessionErrors.inc({ code: errorName(code) });
    const stream = state.stream;
    if (stream.writable) {
      stream.write(
        create(wire.NodeMessageSchema, {
          kind: { case: "error", value: { code, message, redirect } },
        }),
      );
      stream.end();
    }
    this.forget(state);
  }
}

/** Session ids named in one "idle sessions reaped" line, at most (the count is exact). */
const REAP_LOG_IDS = 20;

/** What a guest resuming a session the pair ended is told (SESSION_EXPIRED). */
function expiredMessage(reason: "idle" | "operator"): string {
  const why =
    reason === "idle"
      ? "reaped: no stream was attached for guest.sessionIdleSeconds"
      : "closed by an operator";
  return `session ${why}; its contexts and buffers were freed: open a new session`;
}

/** The names of the verified client certificate of a stream that came over TLS. */
function clientCertificateNames(stream: Stream): readonly string[] {
  const cert = stream.getAuthContext?.().sslPeerCertificate;
  return cert ? certificateNames(cert) : [];
}

function resultBytes(r: wire.FrameResult): number {
  const out = r.result?.output;
  return 64 + (out?.case === "data" ? out.value.byteLength : 0);
}

function malformedResult(e: MalformedError): CallResult {
  return { code: ErrorCode.MALFORMED, message: e.message, output: { kind: "none" } };
}
