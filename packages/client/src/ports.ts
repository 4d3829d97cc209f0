// The ports a guest session runs over: a dialer that opens a stream to a node, timers, a clock,
// a jitter source and an observer. The library implements them with grpc-js and Node's timers
// (connection.ts); the failover simulator with its simulated network and process. Pure types.
import type { CallResult, Timers, wire } from "@vgpu-ha/common";

/** One guest stream to a node, as the session drives it. */
export interface NodeStream {
  send(message: wire.GuestMessage): void;
  /** The guest's half-close: it sends nothing more (after a Close). */
  end(): void;
  /** Drops the stream, whatever its state; nothing more is delivered. */
  cancel(): void;
  /** Where what arrives goes from now on (replaces the previous handlers). */
  listen(handlers: NodeStreamHandlers): void;
  /**
   * The node refused this stream: its connection carries `limit` streams at most. The dialer
   * puts no further session on that connection (and remembers the limit).
   */
  full?(limit: number): void;
}

export interface NodeStreamHandlers {
  message(message: wire.NodeMessage): void;
  /** The stream ended or broke (keepalive, reset, refused): nothing more arrives. */
  closed(reason: string): void;
}

export interface SessionPorts {
  /** Opens a guest stream to `endpoint` (a failure to connect arrives as `closed`). */
  dial(endpoint: string): NodeStream;
  readonly timers: Timers;
  /** Monotonic milliseconds. */
  nowMs(): number;
  /** A uniform draw in [0, 1) (the backoff's jitter). */
  random(): number;
  /** Runs `fn` once the current task is done (frames pushed together leave together). */
  defer(fn: () => void): void;
  readonly observer?: SessionObserver;
}

/** Told what the session does (the simulator's checker; nothing in the library needs it). */
export interface SessionObserver {
  /** Frame `frame` got its result, from this reply. */
  settled?(frame: number, result: CallResult, reply: wire.NodeMessage): void;
  /** The session opened, settled frames or failed: its owner may go on. */
  changed?(): void;
}
