// The guest listener's defences as decisions on an injected clock: a cap on the connections
// each source address holds at once, a token bucket of new streams per connection (a
// connection past it is an abuser: it is closed and its source penalised), and a penalty box
// of sources whose new connections are refused until their penalty ends. Pure: the I/O shell
// (packages/daemon/src/guest-listener.ts) accepts and closes sockets and asks this what to do.
import { TokenBucket } from "./token-bucket.js";

export interface GuestGuardLimits {
  readonly maxConnectionsPerSource: number;
  readonly maxNewStreamsPerConnectionPerSecond: number;
  readonly newStreamBurstPerConnection: number;
  /** Streams the guest resets within a second of opening them (HTTP/2 rapid reset), per second... */
  readonly maxEarlyResetsPerConnectionPerSecond: number;
  /** ...and at most this many at once. */
  readonly earlyResetBurstPerConnection: number;
  /** 0: abusers are closed but not penalised. */
  readonly abusePenaltyMs: number;
  /** Sources held in the penalty box at most; past it the oldest penalty is forgotten. */
  readonly maxPenalisedSources?: number;
}

/** Why a new connection is refused at accept. */
export type ConnectionRefusal = "penalty" | "connections_per_source";

/** One accepted connection, as the guard counts it. */
export interface GuardedConnection {
  readonly source: string;
  readonly streams: TokenBucket;
  readonly resets: TokenBucket;
  closed: boolean;
}

const MAX_PENALISED_SOURCES = 100_000;

export class GuestGuard {
  private readonly limits: GuestGuardLimits;
  /** Open connections by source address (absent: none). */
  private readonly open = new Map<string, number>();
  /** Penalised sources and when their penalty ends, oldest penalty first. */
  private readonly penalties = new Map<string, number>();

  constructor(limits: GuestGuardLimits) {
    this.limits = limits;
  }

  /** A new connection from `source`: counted and returned, or why it is refused. */
  accept(source: string, nowMs: number): GuardedConnection | ConnectionRefusal {
    if (this.penalised(source, nowMs)) return "penalty";
    const n = this.open.get(source) ?? 0;
    if (n >= this.limits.maxConnectionsPerSource) return "connections_per_source";
    this.open.set(source, n + 1);
    const l = this.limits;
    return {
      source,
      streams: new TokenBucket(
        l.maxNewStreamsPerConnectionPerSecond,
        l.newStreamBurstPerConnection,
        nowMs,
      ),
      resets: new TokenBucket(
        l.maxEarlyResetsPerConnectionPerSecond,
        l.earlyResetBurstPerConnection,
        nowMs,
      ),
      closed: false,
    };
  }

  /** The connection is gone (idempotent). */
  closed(conn: GuardedConnection): void {
    if (conn.closed) return;
    conn.closed = true;
    const n = (this.open.get(conn.source) ?? 1) - 1;
    if (n > 0) this.open.set(conn.source, n);
    else this.open.delete(conn.source);
  }

  /**
   * A new stream on `conn`: true when within its rate; false when the connection is abusing
   * it, and then its source is penalised (the caller closes the connection).
   */
  newStream(conn: GuardedConnection, nowMs: number): boolean {
    if (conn.streams.take(nowMs)) return true;
    this.penalise(conn.source, nowMs);
    return false;
  }

  /**
   * The guest reset a stream just after opening it: true within the connection's
   * budget of such resets; false when it abuses it (the source is penalised, as for newStream).
   */
  earlyReset(conn: GuardedConnection, nowMs: number): boolean {
    if (conn.resets.take(nowMs)) return true;
    this.penalise(conn.source, nowMs);
    return false;
  }

  /** Refuses the source's new connections for abusePenaltyMs from now. */
  penalise(source: string, nowMs: number): void {
    if (this.limits.abusePenaltyMs <= 0) return;
    this.penalties.delete(source); // re-inserted last: the map stays oldest first
    this.penalties.set(source, nowMs + this.limits.abusePenaltyMs);
    const max = this.limits.maxPenalisedSources ?? MAX_PENALISED_SOURCES;
    for (const oldest of this.penalties.keys()) {
      if (this.penalties.size <= max) break;
      this.penalties.delete(oldest);
    }
  }

  /** Whether the source is in the penalty box now (an expired penalty is forgotten). */
  penalised(source: string, nowMs: number): boolean {
    const until = this.penalties.get(source);
    if (until === undefined) return false;
    if (nowMs < until) return true;
    this.penalties.delete(source);
    return false;
  }

  /** Connections the source holds open now. */
  connectionsOf(source: string): number {
    return this.open.get(source) ?? 0;
  }

  /** Sources in the penalty box (expired ones included until they are looked at). */
  get penalisedSources(): number {
    return this.penalties.size;
  }
}

/**
 * Streams waiting for their first message, each closed once it has waited `timeoutMs`. One
 * timeout for all and a monotonic clock make arrival order deadline order, so the oldest is
 * always first.
 */
export class FirstMessageDeadlines<T> {
  readonly timeoutMs: number;
  /** Waiting items and when each arrived, oldest first. */
  private readonly waiting = new Map<T, number>();

  constructor(timeoutMs: number) {
    this.timeoutMs = timeoutMs;
  }

  add(item: T, nowMs: number): void {
    this.waiting.set(item, nowMs);
  }

  /** Its first message came, or it is gone: no deadline any more. */
  remove(item: T): void {
    this.waiting.delete(item);
  }

  /** Removes and returns every item whose deadline has passed, oldest first. */
  expired(nowMs: number): T[] {
    const out: T[] = [];
    for (const [item, sinceMs] of this.waiting) {
      if (nowMs - sinceMs < this.timeoutMs) break;
      out.push(item);
    }
    for (const item of out) this.waiting.delete(item);
    return out;
  }

  /** When the oldest deadline falls (undefined when nothing waits). */
  nextDueMs(): number | undefined {
    for (const sinceMs of this.waiting.values()) return sinceMs + this.timeoutMs;
    return undefined;
  }

  get size(): number {
    return this.waiting.size;
  }
}
