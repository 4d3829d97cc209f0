// Which guest sessions have been idle long enough to be reaped: a session is idle while no
// stream is attached, from the moment its last stream detached, measured on this primary's
// monotonic clock (time is an input: every method that needs it takes nowMs). Pure.
//
// A session this tracker has not seen — every session of a primary just promoted, or one
// restored from a snapshot — starts its idle time at the first tick that sees it: a failover
// (or switchover) restarts the idle clock of every session without a stream, so a session is
// reaped at the earliest sessionIdle after the current primary began serving it. The old
// primary's clock is not carried over: monotonic clocks of two hosts cannot be compared, and
// reaping late is safe where reaping early is not.

export interface SessionActivity {
  /** Monotonic ms when this node opened the session (undefined: opened before it served). */
  readonly openedMs: number | undefined;
  /** A stream is attached now. */
  readonly attached: boolean;
  /** Monotonic ms since which no stream has been attached (undefined while one is). */
  readonly idleSinceMs: number | undefined;
}

export class IdleSessions {
  /** Idle time after which a session is reaped; 0: never. */
  readonly idleMs: number;
  private readonly attached = new Set<string>();
  /** Sessions opened on this node: monotonic ms when. */
  private readonly openedAt = new Map<string, number>();
  /** Detached sessions: monotonic ms since when. Insertion order is idle order. */
  private readonly idleSince = new Map<string, number>();

  constructor(idleMs: number) {
    this.idleMs = idleMs;
  }

  /** A stream opened a new session (and is attached to it). */
  opened(id: string, nowMs: number): void {
    this.openedAt.set(id, nowMs);
    this.attach(id);
  }

  /** A stream of the session opened or resumed it. */
  attach(id: string): void {
    this.idleSince.delete(id);
    this.attached.add(id);
  }

  /** The session's stream ended (the session stays open). */
  detach(id: string, nowMs: number): void {
    this.attached.delete(id);
    this.idleSince.delete(id);
    this.idleSince.set(id, nowMs);
  }

  /** The session is closed (by its guest, the reaper or an operator). */
  forget(id: string): void {
    this.attached.delete(id);
    this.idleSince.delete(id);
    this.openedAt.delete(id);
  }

  activity(id: string): SessionActivity {
    const openedMs = this.openedAt.get(id);
    if (this.attached.has(id)) return { openedMs, attached: true, idleSinceMs: undefined };
    return { openedMs, attached: false, idleSinceMs: this.idleSince.get(id) };
  }

  /**
   * Sessions to reap now, longest idle first, at most `max`. `open` is every session the
   * node holds: those not seen before start their idle time now, those gone are forgotten.
   */
  tick(open: Iterable<string>, nowMs: number, max: number): string[] {
    const present = new Set<string>();
    for (const id of open) {
      present.add(id);
      if (!this.attached.has(id) && !this.idleSince.has(id)) this.idleSince.set(id, nowMs);
    }
    for (const id of this.attached) if (!present.has(id)) this.attached.delete(id);
    for (const id of this.openedAt.keys()) if (!present.has(id)) this.openedAt.delete(id);
    const due: string[] = [];
    for (const [id, since] of this.idleSince) {
      if (!present.has(id)) {
        this.idleSince.delete(id);
        continue;
      }
      if (this.idleMs > 0 && nowMs - since >= this.idleMs && due.length < max) due.push(id);
    }
    return due;
  }
}
