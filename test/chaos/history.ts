// What the guests recorded: every frame of every session with its invocation, its outcome and
// who acknowledged it. The checker reads only this, the nodes' final state and their reports.
import type { CallResult, FrameBody } from "@vgpu-ha/common";

/**
 * ok: a result arrived (whatever its code: the node executed the frame, or refused it without
 * a state change). error: the session failed in a way that proves the frame was not applied on
 * the node that kept the session (it resumed elsewhere at an earlier frame). unknown: the
 * session failed otherwise; the checker asks the node how far the session got.
 */
export type Outcome = "pending" | "ok" | "error" | "unknown";

export interface FrameRecord {
  /** The frame number the session gave it (frames are numbered 1, 2, … in call order). */
  readonly number: number;
  readonly body: FrameBody;
  /** "increment" for the counter kernel, else the op or "stores"; "setup", "read" for ours. */
  readonly kind: string;
  readonly invokedMs: number;
  outcome: Outcome;
  settledMs?: number;
  result?: CallResult;
  /** Node id and epoch of the acknowledgement. */
  nodeId?: string;
  epoch?: number;
  error?: string;
}

export interface SessionHistory {
  /** Guest slot (0..sessions-1) and how many sessions that slot had opened before. */
  readonly slot: number;
  readonly generation: number;
  readonly id: string;
  readonly seed: number;
  readonly openedMs: number;
  readonly openedOn: { nodeId: string; epoch: number };
  readonly frames: FrameRecord[];
  /** The counter the session increments (context and buffer handles), once set up. */
  counter?: { context: number; bo: number };
  /** Why the session ended early (SessionClosedError), if it did. */
  failure?: { atMs: number; code: number; message: string };
  /** Frames the client reported lost when it failed ("N lost"), if it did. */
  reportedLost?: number;
  /** The counter value read at the end (live sessions). */
  counterRead?: number;
}

/** An acknowledgement, in arrival order across sessions (for timings and the epoch checks). */
export interface Ack {
  readonly atMs: number;
  readonly slot: number;
  readonly nodeId: string;
  readonly epoch: number;
}

export const acknowledged = (f: FrameRecord) => f.outcome === "ok";
