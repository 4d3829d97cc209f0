// The guest service: the driver of the guest sessions machine (core/guest-sessions.ts) over
// guest streams (the GuestLink port: grpc-js server streams in the daemon, in-memory streams in
// the failover simulator). It feeds each received message to the machine, serves the work in
// fair slices, and performs what the machine asks: replies, ends, flow control, refusals.
//
// Fairness: what arrives is queued per stream and served in short slices, the tenant that has
// used the least service time first (core/fair-queue.ts); a stream with work waiting is not
// read further (flow control holds its sender back). So a tenant flooding the node — with valid
// frames or refused ones — gets its share of the event loop and no more, and another tenant's
// frames wait at most about one slice. Streams without a session yet share one key.
import { randomUUID } from "node:crypto";
import {
  decodeFrame,
  ErrorCode,
  errorName,
  type GuestLink,
  type GuestServerStream,
  grpcGuestLink,
  nodeTimers,
  type ServiceHandlers,
  seqTraceOn,
  type TimerHandle,
  type Timers,
  traceSeq,
  type wire,
} from "@vgpu-ha/common";
import { FairQueue } from "./core/fair-queue.js";
import { FirstMessageDeadlines } from "./core/guest-guard.js";
import type { GuestAction, Refusal, Served } from "./core/guest-session-types.js";
import { GuestSessions } from "./core/guest-sessions.js";
import { encodeReply } from "./guest-replies.js";
import type { GuestServiceDeps } from "./guest-service-deps.js";
import { checkOpen, reportRefusal } from "./open-checks.js";
import type { GuestPort } from "./ports.js";
import { RefusalBudgets } from "./refusal-budgets.js";

export type {
  GuestRefusalInfo,
  GuestServiceDeps,
  GuestServiceRefusal,
} from "./guest-service-deps.js";

/**
 * One slice of service: frames are applied until it has taken this long (at least one). 0.2 ms
 * slices (0.5 ms turns) were measured to cut a single session's call rate by half: the reply
 * batches got small and the turns many. 2 ms keeps another tenant's wait short.
 */
const SLICE_MS = 2;
/** The service runs slices for this long, then lets the event loop read sockets again. */
const TURN_MS = 5;
/** The fair-queue key of streams whose session is not open yet. */
const UNOPENED = "";
/** Session ids named in one "idle sessions reaped" line, at most (the count is exact). */
const REAP_LOG_IDS = 20;

export class GuestService implements GuestPort<GuestLink> {
  private readonly deps: GuestServiceDeps;
  private readonly sessions: GuestSessions<GuestLink>;
  private readonly timers: Timers;
  private readonly cpuMs: () => number;
  /** Streams with work waiting, by tenant; `scheduled` holds those in it (or parked). */
  private readonly fair = new FairQueue<GuestLink>();
  private readonly scheduled = new Set<GuestLink>();
  private turnScheduled = false;
  /** afterApply is due once the messages read in this turn of the event loop are served. */
  private afterApplyScheduled = false;
  /** Each tenant's budget of refused frames. */
  private readonly budgets: RefusalBudgets;
  /** Streams of tenants out of refusal budget, waiting for it to refill. */
  private readonly parked = new Map<string, GuestLink[]>();
  private parkTimer: TimerHandle | undefined;
  /** Streams that have sent nothing yet, closed after deps.openTimeoutMs. */
  private readonly firstMessage: FirstMessageDeadlines<GuestLink> | undefined;
  private openTimer: TimerHandle | undefined;

  constructor(deps: GuestServiceDeps) {
    this.deps = deps;
    this.timers = deps.timers ?? nodeTimers;
    this.cpuMs = deps.cpuMs ?? (() => performance.now());
    this.budgets = new RefusalBudgets(deps.refusals, () => this.now());
    this.firstMessage =
      deps.openTimeoutMs !== undefined ? new FirstMessageDeadlines(deps.openTimeoutMs) : undefined;
    this.sessions = new GuestSessions<GuestLink>({
      sequencer: deps.sequencer,
      idle: deps.idle,
      admission: deps.admission,
      nodeId: deps.nodeId,
      epoch: deps.epoch,
      serving: deps.serving,
      replicatedSeq: deps.replicatedSeq,
      redirect: () => deps.redirect?.() ?? "",
      maxFramesInFlight: deps.maxFramesInFlight,
      maxMessageBytes: deps.maxMessageBytes,
      newSessionId: deps.newSessionId ?? (() => randomUUID()),
      checkOpen: (link, open) => checkOpen(deps, link, open),
      decodeFrame,
      nowMs: () => this.now(),
    });
  }

  /** Highest frame acknowledged to a guest, by seq: for status (acknowledged seq). */
  get ackedSeq(): number {
    return this.sessions.ackedSeq;
  }

  /** The highest seq any reply (an ack, a session opened or closed) went out for. */
  get releasedSeq(): number {
    return this.sessions.releasedSeq;
  }

  /** Frames applied, replies sent and sessions opened (for what a primary would discard). */
  get applied(): {
    readonly frames: number;
    readonly acknowledged: number;
    readonly sessions: number;
  } {
    return this.sessions.applied;
  }

  /** Work received and not served yet (waiting for a turn or for a tenant's budget). */
  get busy(): boolean {
    return this.turnScheduled || this.afterApplyScheduled || this.parkTimer !== undefined;
  }

  get openStreams(): number {
    return this.sessions.openStreams;
  }

  get isPaused(): boolean {
    return this.sessions.isPaused;
  }

  /** Replies waiting for the standby. */
  get heldReplies(): number {
    return this.sessions.heldReplies;
  }

  handlers(): ServiceHandlers<typeof wire.Guest> {
    return { session: (stream) => this.serve(grpcGuestLink(stream)) };
  }

  /** Serves a grpc-js server stream (the daemon's guest port). */
  serveGrpc(stream: GuestServerStream): void {
    this.serve(grpcGuestLink(stream));
  }

  /** Stops (or resumes) reading guest streams: back-pressure while the standby lags. */
  setPaused(paused: boolean): void {
    if (seqTraceOn) traceSeq("p.paused", paused ? 1 : 0);
    this.sessions.setPaused(paused);
    this.perform();
  }

  /** Sends every held reply whose entry the standby has now applied. */
  release(): void {
    this.sessions.release();
    this.perform();
  }

  /** Ends every stream with NOT_PRIMARY (shutdown or loss of the role); held replies are dropped. */
  endAll(message: string): void {
    this.sessions.endAll(message);
    this.perform();
    this.fair.remove(() => true);
    this.scheduled.clear();
    this.parked.clear();
    this.timers.clear(this.parkTimer);
    this.parkTimer = undefined;
    this.firstMessage?.expired(Number.POSITIVE_INFINITY);
    this.timers.clear(this.openTimer);
    this.openTimer = undefined;
  }

  /** Serves one guest stream. */
  serve(link: GuestLink): void {
    if (this.firstMessage) {
      this.firstMessage.add(link, this.now());
      this.armOpenTimer();
    }
    link.onMessage((message) => this.receive(link, message));
    // A stream handed over paused (parked during a promotion) flows once this service may read.
    this.sessions.attach(link);
    this.perform();
    link.onGone(() => this.forget(link));
    link.onEnd(() => {
      this.sessions.guestEnded(link);
      this.perform();
    });
  }

  private forget(link: GuestLink): void {
    this.firstMessage?.remove(link);
    this.sessions.gone(link);
  }

  /**
   * Queues a message for its stream, then serves at once if nothing else waits; otherwise it
   * waits for its turn. The frames limit is judged on arrival, and refused in order.
   */
  private receive(link: GuestLink, message: wire.GuestMessage): void {
    if (!this.sessions.has(link)) return;
    if (seqTraceOn) traceSeq("g.recv");
    this.firstMessage?.remove(link);
    this.sessions.receive(link, message);
    this.schedule(link);
    if (!this.turnScheduled) this.turn();
    this.sessions.flow(link);
    this.perform();
  }

  private schedule(link: GuestLink): void {
    if (this.scheduled.has(link) || !this.sessions.hasWork(link)) return;
    this.scheduled.add(link);
    this.fair.push(this.sessions.tenantOf(link), link);
  }

  /** Serves slices, least-served tenant first, for about TURN_MS; then yields to the loop. */
  private turn(): void {
    this.turnScheduled = false;
    const start = this.cpuMs();
    let served = false;
    for (let next = this.fair.shift(); next; next = this.fair.shift()) {
      const link = next.item;
      if (!this.sessions.has(link)) {
        this.scheduled.delete(link);
        continue;
      }
      if (next.key !== UNOPENED && this.budgets.out(next.key)) {
        this.park(next.key, link); // stays scheduled: it waits for its budget
        continue;
      }
      this.scheduled.delete(link);
      const t0 = this.cpuMs();
      const t1 = this.serveSlice(link, t0);
      served = true;
      this.fair.charge(next.key, t1 - t0);
      if (this.sessions.afterSlice(link)) this.schedule(link);
      this.perform();
      if (this.cpuMs() - start >= TURN_MS) break;
    }
    if (served) {
      this.deps.served?.();
      this.appliedSoon();
    }
    if (!this.fair.empty && !this.turnScheduled) {
      this.turnScheduled = true;
      (this.deps.defer ?? setImmediate)(() => this.turn());
    }
  }

  /**
   * Tells the host (afterApply: send to the standby, release replies) once for every guest
   * message served before the next turn of the event loop, not once per message: a message
   * served at once on arrival (receive) would otherwise go to the standby as a batch of its
   * own, and every batch costs both nodes a gRPC message and the primary an ack to process.
   */
  private appliedSoon(): void {
    if (this.afterApplyScheduled || this.deps.afterApply === undefined) return;
    this.afterApplyScheduled = true;
    (this.deps.defer ?? setImmediate)(() => {
      this.afterApplyScheduled = false;
      this.deps.afterApply?.();
    });
  }

  /**
   * Serves the stream's first queued message, or SLICE_MS worth of its frames, from `startMs`
   * (cpuMs); returns when its frames were done. The clock is read once per frame: a frame's
   * time runs from the end of the one before (performance.now() is ~0.1 µs a read, and three
   * reads a frame were ~5 % of a small call's time).
   */
  private serveSlice(link: GuestLink, startMs: number): number {
    const until = startMs + SLICE_MS;
    let t0 = startMs;
    for (;;) {
      const r = this.sessions.serveOne(link);
      if (r.kind !== "frame") break;
      const t1 = this.cpuMs();
      this.count(r, t1 - t0);
      t0 = t1;
      if (r.refused && !this.budgets.take(r.tenant)) {
        if (!r.malformed) this.deps.metrics.refusalThrottles.inc({ tenant: r.tenant });
        break;
      }
      if (!r.more || t1 >= until) break;
    }
    this.sessions.flush(link);
    return t0;
  }

  private count(r: Served & { kind: "frame" }, ms: number): void {
    const { metrics } = this.deps;
    const stats = metrics.callStats;
    stats.frame(r.outcome).count++;
    if (r.malformed || r.outcome !== "applied") return;
    stats.call(r.op, errorName(r.code)).count++;
    stats.duration(r.op).observe(ms / 1000);
    if (r.stores > 0) metrics.mmioStores.inc(r.stores);
  }

  /** Does what the machine asked, in order. */
  private perform(): void {
    for (const a of this.sessions.takeActions()) this.act(a);
  }

  private act(a: GuestAction<GuestLink>): void {
    switch (a.kind) {
      case "reply": {
        if (!a.stream.writable) return;
        if (a.reply.kind === "error") {
          this.deps.metrics.sessionErrors.inc({ code: errorName(a.reply.code) });
        }
        const message = encodeReply(a.reply);
        a.stream.send(message);
        if (seqTraceOn) traceSeq("p.reply", a.released.at(-1)?.seq ?? 0, a.released.length);
        this.deps.onReply?.(a.stream, message, a.released);
        return;
      }
      case "end":
        this.firstMessage?.remove(a.stream);
        if (a.stream.writable) a.stream.end();
        return;
      case "pause":
        a.stream.pause();
        return;
      case "resume":
        a.stream.resume();
        return;
      case "refuse-later":
        this.refuseLater(a.stream, a.refusal, a.waitMs);
        return;
      case "session":
        if (a.event !== "closed") {
          this.deps.metrics.sessionsOpened.inc({ kind: a.event === "opened" ? "new" : "resume" });
        }
        this.deps.log.debug(
          { session: a.sessionId, tenant: a.tenant },
          a.event === "closed" ? "session closed" : "session opened",
        );
        return;
    }
  }

  /**
   * An open above the tenant's rate is answered only when the rate would have let it through
   * (at most a second later): a storm of opens gets its refusals at the rate it is allowed, and
   * each connection holds at most guest.maxStreamsPerConnection of them. Nothing it sends
   * meanwhile is read.
   */
  private refuseLater(link: GuestLink, refusal: Refusal, waitMs: number): void {
    link.pause();
    const timer = this.timers.setTimeout(Math.min(1000, waitMs), () => {
      this.act({
        kind: "reply",
        stream: link,
        reply: { kind: "error", ...refusal, redirect: "" },
        released: [],
      });
      this.act({ kind: "end", stream: link });
    });
    link.onGone(() => this.timers.clear(timer));
  }

  // ---- sessions ended by the node: the idle reaper and operators ----

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
    const ended = this.sessions.endSession(id, reason);
    this.perform();
    if (ended !== undefined) this.deps.afterApply?.();
    return ended;
  }

  /**
   * Ends the sessions idle for guest.sessionIdleSeconds (at most `max`, the longest idle
   * first); counts them by tenant and logs one line for all. What was reaped, by tenant.
   */
  reapIdle(max: number): Map<string, number> {
    const reaped = this.sessions.reapIdle(max);
    this.perform();
    const byTenant = new Map<string, number>();
    for (const { tenant } of reaped) {
      this.deps.afterApply?.();
      byTenant.set(tenant, (byTenant.get(tenant) ?? 0) + 1);
      this.deps.metrics.sessionsReaped.inc({ tenant });
    }
    if (reaped.length > 0) {
      this.deps.log.info(
        {
          seq: this.deps.sequencer.log.lastSeq,
          reaped: reaped.length,
          byTenant: Object.fromEntries(byTenant),
          idleSeconds: (this.deps.idle?.idleMs ?? 0) / 1000,
          sessions: reaped.slice(0, REAP_LOG_IDS).map((r) => r.id),
        },
        "idle sessions reaped",
      );
    }
    return byTenant;
  }

  // ---- the open timeout ----

  /** Wakes when the oldest stream without a first message is due. */
  private armOpenTimer(): void {
    const due = this.firstMessage?.nextDueMs();
    if (this.openTimer !== undefined || due === undefined) return;
    this.openTimer = this.timers.setTimeout(Math.max(1, Math.ceil(due - this.now())), () => {
      this.openTimer = undefined;
      this.closeSilent();
    });
  }

  /** Ends every stream that sent nothing within the open timeout. */
  private closeSilent(): void {
    const timeoutMs = this.firstMessage?.timeoutMs;
    for (const link of this.firstMessage?.expired(this.now()) ?? []) {
      reportRefusal(this.deps, "open_timeout", link);
      this.act({
        kind: "reply",
        stream: link,
        reply: {
          kind: "error",
          code: ErrorCode.LIMIT_EXCEEDED,
          message: `no Open within ${timeoutMs} ms (guest.openTimeoutMs)`,
          redirect: "",
        },
        released: [],
      });
      this.act({ kind: "end", stream: link });
      this.sessions.gone(link);
    }
    this.armOpenTimer();
  }

  // ---- each tenant's budget of refused frames ----

  private now(): number {
    return this.deps.nowMs?.() ?? performance.now();
  }

  /** Holds a stream of an out-of-budget tenant until its budget has a token again. */
  private park(tenant: string, link: GuestLink): void {
    const list = this.parked.get(tenant);
    if (list) list.push(link);
    else this.parked.set(tenant, [link]);
    this.armParkTimer();
  }

  private armParkTimer(): void {
    if (this.parkTimer !== undefined || this.parked.size === 0) return;
    let waitMs = Number.POSITIVE_INFINITY;
    for (const tenant of this.parked.keys()) {
      waitMs = Math.min(waitMs, this.budgets.waitMs(tenant));
    }
    this.parkTimer = this.timers.setTimeout(Math.max(1, Math.ceil(waitMs)), () => this.unpark());
  }

  private unpark(): void {
    this.parkTimer = undefined;
    for (const [tenant, list] of [...this.parked]) {
      if (!this.budgets.refilled(tenant)) continue;
      this.parked.delete(tenant);
      for (const link of list) {
        if (this.sessions.has(link)) this.fair.push(tenant, link);
        else this.scheduled.delete(link);
      }
    }
    this.armParkTimer();
    if (!this.turnScheduled) this.turn();
  }
}
