// The replication log's records, as domain types. The wire form is in gen/ (Entry in
// replication.proto); wire/entry-codec.ts converts at the edge.
import type { Call } from "../calls.js";
import type { ErrorCode } from "./errors.js";

export interface BoRef {
  readonly context: number;
  readonly bo: number;
}

/** Guest handles a call assigned or released: the handle-mapping table delta. */
export interface HandleDelta {
  readonly contextsCreated: readonly number[];
  readonly contextsDestroyed: readonly number[];
  readonly bosAssigned: readonly BoRef[];
  readonly bosReleased: readonly BoRef[];
}

export const EMPTY_DELTA: HandleDelta = Object.freeze({
  contextsCreated: [],
  contextsDestroyed: [],
  bosAssigned: [],
  bosReleased: [],
});

/** A call's outcome as the standby checks it: the code and a digest of the output. */
export interface ResultSummary {
  readonly code: ErrorCode;
  /** The output in short (see result-summary.ts in gpu-model); empty when there is none. */
  readonly outputDigest: Uint8Array;
}

/** A store frame applied on the primary, for the standby's session table. */
export interface FrameRecord {
  readonly sessionId: string;
  readonly frame: number;
  readonly code: ErrorCode;
  readonly message: string;
}

export interface PageExtent {
  readonly offsetInPage: number;
  readonly data: Uint8Array;
}

export interface PageWrite {
  readonly context: number;
  readonly bo: number;
  readonly pageIndex: number;
  readonly extents: readonly PageExtent[];
}

export type EntryBody =
  | {
      readonly kind: "call";
      readonly sessionId: string;
      readonly frame: number;
      readonly call: Call;
      readonly handles: HandleDelta;
      readonly result: ResultSummary;
    }
  | {
      readonly kind: "mmioPages";
      readonly pages: readonly PageWrite[];
      readonly frames: readonly FrameRecord[];
    }
  | {
      readonly kind: "mmioStore";
      readonly context: number;
      readonly bo: number;
      readonly offset: number;
      readonly data: Uint8Array;
      readonly frames: readonly FrameRecord[];
    }
  | { readonly kind: "sessionOpen"; readonly sessionId: string; readonly tenant: string }
  | {
      readonly kind: "sessionClose";
      readonly sessionId: string;
      readonly reason: SessionCloseReason;
    }
  | { readonly kind: "checkpoint"; readonly digest: string; readonly requestId: number };

/**
 * Who ended a session: the guest (Close), the primary's idle reaper (no stream attached for
 * guest.sessionIdleSeconds) or an operator. Both nodes remember the last two, so a guest that
 * resumes such a session later is told SESSION_EXPIRED rather than UNKNOWN_SESSION.
 */
export type SessionCloseReason = "guest" | "idle" | "operator";

export type EntryKind = EntryBody["kind"];

export const ENTRY_KINDS = [
  "call",
  "mmioPages",
  "mmioStore",
  "sessionOpen",
  "sessionClose",
  "checkpoint",
] as const satisfies readonly EntryKind[];

export interface Entry {
  readonly seq: number;
  readonly body: EntryBody;
}

/** About the bytes an entry takes on the wire; used for lag and batch bounds. */
export function entryBytes(body: EntryBody): number {
  switch (body.kind) {
    case "call": {
      const c = body.call;
      return 64 + body.sessionId.length + (c.op === "dmaWrite" ? c.data.byteLength : 0);
    }
    case "mmioPages": {
      let n = 16 + 24 * body.frames.length;
      for (const p of body.pages) {
        n += 12;
        for (const e of p.extents) n += 6 + e.data.byteLength;
      }
      return n;
    }
    case "mmioStore":
      return 24 + body.data.byteLength + 24 * body.frames.length;
    case "sessionOpen":
      return 16 + body.sessionId.length + body.tenant.length;
    case "sessionClose":
      return 16 + body.sessionId.length;
    case "checkpoint":
      return 24 + body.digest.length;
  }
}
