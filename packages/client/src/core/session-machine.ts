// The client session's failover rules as a pure machine: which node to dial next, when to give
// up, and whether a node's answer may be believed. Inputs in (a dial's outcome, a stream lost, a
// retry timer due, an Acks' epoch), steps out (dial this endpoint, retry after so long, attach
// the stream, drop it, fail the session). No timers, no streams, no promises: time and the
// jitter draw are inputs; session.ts drives it over ports (a dialer, timers, a clock).
//
// Rules (DESIGN §5): a session opens on the first endpoint that serves it; once lost it
// reconnects, to the node it was pointed at (a redirect) else the next endpoint, with backoff
// from 10 ms doubling to retryMaxMs and jitter, for at most failoverTimeoutMs. A node of an
// older epoch than one seen is not believed (its stream is dropped); a node that lacks frames
// whose replies were delivered fails the session (FRAME_OUT_OF_ORDER: an async failover lost
// them); replies of an older epoch are ignored. Some codes are fatal: another node cannot help.
// UNKNOWN_SESSION and SESSION_EXPIRED fail a resume only once no node can serve the session.
import { ErrorCode } from "@vgpu-ha/common/core";

/** Codes after which trying another node cannot help. */
export const FATAL: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  ErrorCode.UNAUTHENTICATED,
  ErrorCode.UNKNOWN_SESSION,
  ErrorCode.SESSION_EXPIRED,
  ErrorCode.LIMIT_EXCEEDED,
  ErrorCode.MALFORMED,
  ErrorCode.WRONG_CLUSTER,
]);

/** Why a dial or a stream failed: the node's answer, or the transport's. */
export interface NodeRefusal {
  readonly code: ErrorCode;
  readonly message: string;
  /** Where the node said to go instead ("" for nowhere). */
  readonly redirect: string;
  /** The node answered with this error (rather than the stream failing or timing out). */
  readonly answered: boolean;
}

/** A node's Opened answer. */
export interface OpenedInfo {
  readonly sessionId: string;
  readonly epoch: number;
  readonly lastFrame: number;
  readonly nodeId: string;
}

export type SessionStep =
  | { readonly kind: "dial"; readonly endpoint: string; readonly resumeSessionId: string }
  | { readonly kind: "retry"; readonly afterMs: number }
  /** Take the dialed stream: the session is open (or resumed: re-send what is unanswered). */
  | { readonly kind: "attach"; readonly resumed: boolean }
  /** Drop the dialed stream (its node is not to be believed). */
  | { readonly kind: "drop" }
  | { readonly kind: "fail"; readonly error: NodeRefusal };

export interface SessionMachineOptions {
  readonly endpoints: readonly string[];
  /** How long a reconnection may keep trying before the session fails. */
  readonly failoverTimeoutMs: number;
  /** Longest pause between reconnection attempts. */
  readonly retryMaxMs: number;
}

/** What a dial's outcome is judged against. */
export interface DialContext {
  /** The highest frame whose reply the guest has (0 when none). */
  readonly settledThrough: number;
  readonly nowMs: number;
  /** Draws uniformly from [0, 1) for the backoff's jitter (only when a backoff is due). */
  readonly random: () => number;
}

interface Reconnect {
  readonly deadlineMs: number;
  attempt: number;
  next: string | undefined;
  lastError: NodeRefusal;
  /** The endpoint that failed last: a redirect back to it is stale. */
  failed: string | undefined;
  /** Nodes that answered the resume with UNKNOWN_SESSION or SESSION_EXPIRED, and NOT_PRIMARY. */
  readonly unknownAt: Set<string>;
  readonly standbyAt: Set<string>;
  unknown: NodeRefusal | undefined;
}

export type SessionPhase = "opening" | "attached" | "reconnecting" | "failed";

export class SessionMachine {
  private readonly o: SessionMachineOptions;
  phase: SessionPhase = "opening";
  sessionId = "";
  nodeId = "";
  /** Highest epoch seen in any reply. */
  epoch = 0;
  /** Times the session moved to another stream. */
  resumes = 0;
  failure: NodeRefusal | undefined;
  private endpointIndex = 0;
  /** While opening: the endpoint tried now; its refusal so far. */
  private openIndex = 0;
  private reconnect: Reconnect | undefined;

  constructor(options: SessionMachineOptions) {
    if (options.endpoints.length === 0) throw new Error("a session needs at least one endpoint");
    this.o = options;
  }

  /** The first dial of a new session. */
  open(): SessionStep {
    return { kind: "dial", endpoint: this.o.endpoints[0]!, resumeSessionId: "" };
  }

  /** What a dial to `endpoint` came to: the node's Opened, or why there is none. */
  dialed(endpoint: string, outcome: OpenedInfo | NodeRefusal, ctx: DialContext): SessionStep[] {
    if (this.phase === "failed") return "sessionId" in outcome ? [{ kind: "drop" }] : [];
    if (this.phase === "opening") return this.opening(endpoint, outcome);
    if ("sessionId" in outcome) return this.resumed(endpoint, outcome, ctx);
    return this.refused(endpoint, outcome, ctx);
  }

  /** A reconnection's backoff is over: the next dial, or the failure past the deadline. */
  retryDue(nowMs: number): SessionStep[] {
    const r = this.reconnect;
    if (this.phase !== "reconnecting" || r === undefined) return [];
    if (nowMs >= r.deadlineMs) return [this.fail(r.lastError)];
    // A redirect back to the node that just failed is stale (its peer cannot know yet).
    if (r.next === r.failed) r.next = undefined;
    if (r.next === undefined)
      this.endpointIndex = (this.endpointIndex + 1) % this.o.endpoints.length;
    const endpoint = r.next ?? this.o.endpoints[this.endpointIndex]!;
    r.next = undefined;
    return [{ kind: "dial", endpoint, resumeSessionId: this.sessionId }];
  }

  /**
   * The attached stream broke or its node refused: resume elsewhere, unless that cannot help
   * (a fatal code) or the guest is closing the session.
   */
  lost(error: NodeRefusal, closing: boolean, nowMs: number): SessionStep[] {
    if (this.phase !== "attached") return [];
    if (closing || FATAL.has(error.code)) return [this.fail(error)];
    this.phase = "reconnecting";
    this.reconnect = {
      deadlineMs: nowMs + this.o.failoverTimeoutMs,
      attempt: 0,
      next: error.redirect !== "" ? error.redirect : undefined,
      lastError: error,
      failed: undefined,
      unknownAt: new Set(),
      standbyAt: new Set(),
      unknown: undefined,
    };
    return this.retryDue(nowMs);
  }

  /** Whether to believe an Acks of `epoch` (never one older than an epoch seen). */
  acks(epoch: number): boolean {
    if (epoch < this.epoch) return false;
    this.epoch = epoch;
    return true;
  }

  /** The session ended for a reason of the guest's own (closed, or failed by the driver). */
  fail(error: NodeRefusal): SessionStep & { kind: "fail" } {
    this.phase = "failed";
    this.failure ??= error;
    this.reconnect = undefined;
    return { kind: "fail", error: this.failure };
  }

  private opening(endpoint: string, outcome: OpenedInfo | NodeRefusal): SessionStep[] {
    if ("sessionId" in outcome) {
      this.phase = "attached";
      this.sessionId = outcome.sessionId;
      this.nodeId = outcome.nodeId;
      this.epoch = outcome.epoch;
      this.endpointIndex = Math.max(0, this.o.endpoints.indexOf(endpoint));
      return [{ kind: "attach", resumed: false }];
    }
    this.openIndex++;
    if (FATAL.has(outcome.code) || this.openIndex >= this.o.endpoints.length) {
      return [this.fail(outcome)];
    }
    const next = this.o.endpoints[this.openIndex]!;
    return [{ kind: "dial", endpoint: next, resumeSessionId: "" }];
  }

  /** Takes a resumed stream if its node is not older and has not lost answered frames. */
  private resumed(endpoint: string, opened: OpenedInfo, ctx: DialContext): SessionStep[] {
    // A node from an older epoch is not to be believed: drop it and keep trying.
    if (opened.epoch < this.epoch) return [{ kind: "drop" }, this.backoff(ctx)];
    const answered = ctx.settledThrough;
    if (opened.lastFrame < answered) {
      const lost = answered - opened.lastFrame;
      const message = `${opened.nodeId} has frame ${opened.lastFrame} but ${answered} were acknowledged: ${lost} lost (async failover)`;
      const error = { code: ErrorCode.FRAME_OUT_OF_ORDER, message, redirect: "", answered: true };
      return [{ kind: "drop" }, this.fail(error)];
    }
    this.phase = "attached";
    this.reconnect = undefined;
    this.epoch = opened.epoch;
    this.nodeId = opened.nodeId;
    // Reached by a redirect too: the next failover starts from the other endpoint, not from
    // this one (found by the chaos harness: a stale index sent sessions back to a paused node).
    const index = this.o.endpoints.indexOf(endpoint);
    if (index >= 0) this.endpointIndex = index;
    this.resumes++;
    return [{ kind: "attach", resumed: true }];
  }

  private refused(endpoint: string, error: NodeRefusal, ctx: DialContext): SessionStep[] {
    const r = this.reconnect!;
    r.lastError = error;
    if (error.code === ErrorCode.UNKNOWN_SESSION || error.code === ErrorCode.SESSION_EXPIRED) {
      // A primary of an older epoch (peer mode, split brain) does not know a session the other
      // node serves, or reaped it alone: the session is lost only once no other node can serve
      // it. An expiry is the answer that says the most.
      r.unknownAt.add(endpoint);
      if (r.unknown?.code !== ErrorCode.SESSION_EXPIRED) r.unknown = error;
      r.failed = endpoint;
    } else if (FATAL.has(error.code)) {
      return [this.fail(error)];
    } else if (error.redirect !== "") {
      r.next = error.redirect;
    } else {
      r.failed = endpoint;
    }
    if (error.answered && error.code === ErrorCode.NOT_PRIMARY) r.standbyAt.add(endpoint);
    const lost = this.o.endpoints.every((x) => r.unknownAt.has(x) || r.standbyAt.has(x));
    if (r.unknown !== undefined && lost) return [this.fail(r.unknown)];
    return [this.backoff(ctx)];
  }

  /** Failover happens on the scale of a lease: retry often, with jitter. */
  private backoff(ctx: DialContext): SessionStep {
    const r = this.reconnect!;
    r.attempt++;
    const backoffMs = Math.min(this.o.retryMaxMs, 10 * 2 ** Math.min(r.attempt, 12));
    return { kind: "retry", afterMs: backoffMs * (0.5 + ctx.random() / 2) };
  }
}
