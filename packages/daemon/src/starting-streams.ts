// Replication streams that reach the node before its first role is decided. The replication
// port listens before that decision (the peer probe that makes it is answered there), so a
// primary dialling a restarted standby often gets through while it still probes. Handed to the
// placeholder role, such a stream was answered — the primary began a snapshot on its hello —
// and then dropped with the placeholder ("role decided"), so the primary redialled and began a
// second snapshot: the first one was wasted, and the standby joined a few hundred ms later.
// Parked here instead, unread (a paused stream: what the primary sent waits in it), a stream
// goes to the role decided, which answers it as it answers any stream.
/** At most this many streams wait for the role; any more are ended at once (the peer redials). */
export const STARTING_STREAMS_MAX = 8;

/** What parking needs of a stream: its events (to drop one that ends) and a way to end it. */
export interface ParkableStream {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  off(event: string, listener: (...args: unknown[]) => void): unknown;
  end(): unknown;
}

/** Events that end a parked stream: it is dropped from the park, never handed to a role. */
const ENDED = ["cancelled", "close", "error"] as const;

export class StartingStreams<S extends ParkableStream> {
  /** Parked streams, oldest first, each with what it listens to; undefined once released. */
  private parked: Map<S, () => void> | undefined = new Map();
  private readonly max: number;

  constructor(max = STARTING_STREAMS_MAX) {
    this.max = max;
  }

  /** Whether streams are still parked (the first role not decided yet). */
  get parking(): boolean {
    return this.parked !== undefined;
  }

  /** How many wait now. */
  get size(): number {
    return this.parked?.size ?? 0;
  }

  /**
   * Takes a stream while the role is undecided (true: parked, or ended when the park is full);
   * false once released: the caller hands it to the role itself.
   */
  park(stream: S): boolean {
    const parked = this.parked;
    if (parked === undefined) return false;
    if (parked.size >= this.max) {
      stream.end();
      return true;
    }
    const drop = () => {
      for (const e of ENDED) stream.off(e, drop);
      parked.delete(stream);
    };
    for (const e of ENDED) stream.on(e, drop);
    parked.set(stream, drop);
    return true;
  }

  /** The role is decided: each stream still open goes to `accept`, in arrival order. */
  release(accept: (stream: S) => void): void {
    const parked = this.parked;
    this.parked = undefined;
    for (const [stream, drop] of parked ?? []) {
      drop();
      accept(stream);
    }
  }

  /** The node stops before deciding: the parked streams end. */
  close(): void {
    this.release((stream) => stream.end());
  }
}
