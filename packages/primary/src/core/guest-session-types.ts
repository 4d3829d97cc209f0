// The guest sessions machine's vocabulary (core/guest-sessions.ts): its options, the replies
// and actions it emits, and what serving one unit of work did.
import type {
  CallResult,
  ErrorCode,
  Frame,
  GuestMessage,
  GuestOpen,
  WireFrame,
} from "@vgpu-ha/common/core";
import type { Held, Session } from "./guest-steps.js";
import type { IdleSessions } from "./idle-sessions.js";
import type { Sequencer } from "./sequencer.js";
import type { SessionAdmission } from "./session-admission.js";

export interface GuestSessionsOptions<S> {
  readonly sequencer: Sequencer;
  readonly idle?: IdleSessions | undefined;
  readonly admission?: SessionAdmission | undefined;
  readonly nodeId: string;
  readonly epoch: () => number;
  /** Whether this node serves guests now; when not, what a stream sends is NOT_PRIMARY. */
  readonly serving: () => boolean;
  /** Replies whose seq is at most this may go out; -1 holds all, undefined releases at once. */
  readonly replicatedSeq: () => number | undefined;
  readonly redirect: () => string;
  /** Frames a session may have sent and not had answered yet. */
  readonly maxFramesInFlight: number;
  /** Acks are split so that none exceeds half of this. */
  readonly maxMessageBytes: number;
  readonly newSessionId: () => string;
  /** The driver's checks of an Open (cluster, credentials): a refusal, or undefined. */
  readonly checkOpen: (stream: S, open: GuestOpen) => Refusal | undefined;
  /** Monotonic ms (idle sessions). */
  readonly nowMs: () => number;
  /** A wire frame as the domain frame, or why it does not decode (the driver's codec). */
  readonly decodeFrame: (frame: WireFrame) => Frame | Error;
}

export interface Refusal {
  readonly code: ErrorCode;
  readonly message: string;
}

/** A reply to a guest, in domain form; the driver encodes it. */
export type GuestReply =
  | {
      readonly kind: "opened";
      readonly sessionId: string;
      readonly epoch: number;
      readonly lastFrame: number;
      readonly nodeId: string;
    }
  | {
      readonly kind: "acks";
      readonly epoch: number;
      readonly ackedThrough: number;
      readonly results: readonly { readonly number: number; readonly result: CallResult }[];
    }
  | { readonly kind: "closed" }
  | {
      readonly kind: "error";
      readonly code: ErrorCode;
      readonly message: string;
      readonly redirect: string;
    };

/** What a reply released: its session, the frames it answers (0: Opened) and the seq it waited for. */
export interface Released {
  readonly sessionId: string;
  readonly frame: number;
  readonly seq: number;
}

export type GuestAction<S> =
  | {
      readonly kind: "reply";
      readonly stream: S;
      readonly reply: GuestReply;
      readonly released: readonly Released[];
    }
  /** The node's half-close, after the replies before it. */
  | { readonly kind: "end"; readonly stream: S }
  | { readonly kind: "pause"; readonly stream: S }
  | { readonly kind: "resume"; readonly stream: S }
  /** An open over the tenant's rate: answer `refusal` after waitMs, read nothing meanwhile. */
  | {
      readonly kind: "refuse-later";
      readonly stream: S;
      readonly refusal: Refusal;
      readonly waitMs: number;
    }
  | {
      readonly kind: "session";
      readonly event: "opened" | "resumed" | "closed";
      readonly sessionId: string;
      readonly tenant: string;
    };

/** What serving one unit of a stream's work did (for the driver's metrics and budgets). */
export type Served =
  | { readonly kind: "message" }
  | {
      readonly kind: "frame";
      readonly tenant: string;
      /** The frame did not decode (answered MALFORMED without applying it; counted rejected). */
      readonly malformed: boolean;
      readonly outcome: "applied" | "duplicate" | "rejected";
      readonly op: string;
      readonly code: ErrorCode;
      /** MMIO stores applied by it. */
      readonly stores: number;
      /** A refused frame (counts against the tenant's refusal budget). */
      readonly refused: boolean;
      /** The stream's current Frames message has frames left. */
      readonly more: boolean;
    };

/** A message received and not served yet (or a refusal to send in its turn). */
export type Pending =
  | { readonly kind: "message"; readonly message: GuestMessage }
  | { readonly kind: "refuse"; readonly refusal: Refusal };

/** One guest stream: its session, what it sent, and the replies waiting for replication. */
export interface StreamState {
  session: Session | undefined;
  opened: { readonly seq: number; readonly reply: GuestReply & { kind: "opened" } } | undefined;
  readonly held: Held[];
  /** After a Close: the seq of the close entry; Closed goes out once it is replicated. */
  closing: number | undefined;
  readonly queue: Pending[];
  /** Frames of the first queued message already served. */
  served: number;
  /** Frames received and not served yet (they count as in flight). */
  queuedFrames: number;
  /** The guest half-closed: end the stream once its queue is served. */
  ended: boolean;
}
