// The steps of the guest sessions machine (core/guest-sessions.ts) that need none of its
// state: a session opened or found for a resume, one frame through the sequencer, the replies
// split to fit a message.
import {
  type CallResult,
  ErrorCode,
  type GuestOpen,
  type SessionCloseReason,
  type WireFrame,
} from "@vgpu-ha/common/core";
import type { GuestSessionsOptions, Refusal, Served } from "./guest-session-types.js";
import type { Sequencer } from "./sequencer.js";

export type Session = NonNullable<ReturnType<Sequencer["backend"]["sessions"]["get"]>>;

/** A reply waiting for the standby: its frame's reply, and the seq it waits for. */
export interface Held {
  /** The session's last frame once this one was applied (the cumulative ack). */
  readonly frame: number;
  readonly seq: number;
  /** The frame number it answers. */
  readonly number: number;
  readonly result: CallResult;
}

/**
 * Decodes and applies one frame: the reply to hold, and what it did (`more`: its message has
 * frames after it). A frame that does not decode is answered MALFORMED (counted rejected)
 * without reaching the backend. What it did is one object literal, never a spread of another:
 * `{ ...served, more }` cost ~1.7 µs a frame on Node 20 (V8 clones it slowly), a literal ~20 ns.
 */
export function applyFrame(
  o: Pick<GuestSessionsOptions<unknown>, "sequencer" | "decodeFrame">,
  session: Session,
  wireFrame: WireFrame,
  more: boolean,
): { held: Held; served: Served & { kind: "frame" } } {
  const tenant = session.tenant;
  const frame = o.decodeFrame(wireFrame);
  if (frame instanceof Error) {
    const result = malformedResult(frame);
    const held = { frame: session.lastFrame, seq: 0, number: Number(wireFrame.number), result };
    const code = ErrorCode.MALFORMED;
    return {
      held,
      served: {
        kind: "frame",
        tenant,
        malformed: true,
        outcome: "rejected",
        op: "",
        code,
        stores: 0,
        refused: true,
        more,
      },
    };
  }
  const { outcome, seq } = o.sequencer.applyFrame(session, frame);
  const result = outcome.result;
  const held = { frame: session.lastFrame, seq, number: frame.number, result };
  const ok = result.code === ErrorCode.OK;
  const applied = outcome.kind === "applied";
  const body = frame.body;
  return {
    held,
    served: {
      kind: "frame",
      tenant,
      malformed: false,
      outcome: outcome.kind,
      op: body.kind === "call" ? body.call.op : "stores",
      code: result.code,
      stores: applied && ok && body.kind === "stores" ? body.batch.offsets.length : 0,
      // A replayed reply is not counted: a resumed session may re-send many at once.
      refused: outcome.kind !== "duplicate" && !ok,
      more,
    },
  };
}

/** A session found or opened, or the refusal to send (waitMs > 0: only after that long). */
export type OpenStep =
  | { readonly session: Session }
  | { readonly refusal: Refusal; readonly waitMs: number };

/** The session an Open resumes; someone else's is exactly as unknown as one that never was. */
export function resumedSession(sequencer: Sequencer, open: GuestOpen): OpenStep {
  const session = sequencer.backend.sessions.get(open.resumeSessionId);
  if (session !== undefined && session.tenant === open.tenant) return { session };
  const ended = sequencer.backend.ended.get(open.resumeSessionId);
  const refusal =
    ended !== undefined && ended.tenant === open.tenant
      ? { code: ErrorCode.SESSION_EXPIRED, message: expiredMessage(ended.reason) }
      : { code: ErrorCode.UNKNOWN_SESSION, message: "no such session" };
  return { refusal, waitMs: 0 };
}

/** A new session, within the admission limits (counts and rate) of its tenant. */
export function newSession(
  o: Pick<GuestSessionsOptions<unknown>, "sequencer" | "admission" | "newSessionId">,
  open: GuestOpen,
): OpenStep {
  const refused = o.admission?.admit(open.tenant, sessionCounts(o.sequencer, open.tenant));
  if (refused) {
    return {
      refusal: { code: ErrorCode.LIMIT_EXCEEDED, message: refused.reason },
      waitMs: refused.waitMs,
    };
  }
  const opened = o.sequencer.openSession(o.newSessionId(), open.tenant);
  if ("code" in opened) return { refusal: opened, waitMs: 0 };
  return { session: opened };
}

/** Sessions open on this node (replicated state: a resumed or failed-over one counts). */
function sessionCounts(sequencer: Sequencer, tenant: string): { total: number; ofTenant: number } {
  const sessions = sequencer.backend.sessions;
  let ofTenant = 0;
  for (const s of sessions.values()) if (s.tenant === tenant) ofTenant++;
  return { total: sessions.size, ofTenant };
}

/** Held replies in runs of at most budgetBytes each (at least one reply a run). */
export function splitAcks(out: readonly Held[], budgetBytes: number): Held[][] {
  const parts: Held[][] = [];
  let start = 0;
  let bytes = 0;
  for (let i = 0; i <= out.length; i++) {
    const size = i < out.length ? resultBytes(out[i]!.result) : 0;
    if (i === out.length || (i > start && bytes + size > budgetBytes)) {
      if (i > start) parts.push(out.slice(start, i));
      start = i;
      bytes = 0;
    }
    bytes += size;
  }
  return parts;
}

/** What a guest resuming a session the pair ended is told (SESSION_EXPIRED). */
export function expiredMessage(reason: Exclude<SessionCloseReason, "guest">): string {
  const why =
    reason === "idle"
      ? "reaped: no stream was attached for guest.sessionIdleSeconds"
      : "closed by an operator";
  return `session ${why}; its contexts and buffers were freed: open a new session`;
}

function resultBytes(r: CallResult): number {
  return 64 + (r.output.kind === "data" ? r.output.data.byteLength : 0);
}

function malformedResult(e: Error): CallResult {
  return { code: ErrorCode.MALFORMED, message: e.message, output: { kind: "none" } };
}
