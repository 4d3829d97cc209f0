// A planned switchover as explicit states with deadlines. Guests pause; the handover is
// announced at the last seq (an empty digest: the standby computes its digest there while this
// node computes its own); once the standby applied everything, every reply is out and (etcd
// mode) the record names it, the handover goes out with the digest; the switchover ends when
// the node has stepped down, or fails at its deadline or when the standby falls out of sync.
//
//   idle → draining(deadline) → handing(lastSeq, digest, deadline) → idle
//                  ╰──── fail: deadline, standby out of sync ────╯

/** What the switchover waits for, read at each poll. */
export interface SwitchoverFacts {
  readonly nowMs: number;
  readonly lastSeq: number;
  readonly appliedSeq: number;
  readonly inSync: boolean;
  readonly heldReplies: number;
  /** etcd mode: the record does not name the standby yet (always false in peer mode). */
  readonly unnamed: boolean;
}

export type SwitchoverState =
  | { readonly phase: "idle" }
  | {
      readonly phase: "draining";
      readonly startedMs: number;
      readonly deadlineMs: number;
      readonly timeoutMs: number;
      /** The seq the handover was announced at (its digest may be reused). */
      readonly announcedSeq: number;
    }
  | {
      readonly phase: "handing";
      readonly startedMs: number;
      readonly deadlineMs: number;
      readonly lastSeq: number;
      readonly digest: string;
    };

/** What a poll of a draining switchover says. */
export type DrainStep =
  | { readonly kind: "wait" }
  | { readonly kind: "failed"; readonly why: string }
  /** Everything is out: hand over at `lastSeq` (`reuseDigest`: the announced seq's digest). */
  | { readonly kind: "ready"; readonly lastSeq: number; readonly reuseDigest: boolean };

export const SWITCHOVER_IDLE: SwitchoverState = { phase: "idle" };

/** Starts draining at `lastSeq` (the announcement's seq). */
export function beginSwitchover(
  nowMs: number,
  timeoutMs: number,
  lastSeq: number,
): SwitchoverState {
  return {
    phase: "draining",
    startedMs: nowMs,
    deadlineMs: nowMs + timeoutMs,
    timeoutMs,
    announcedSeq: lastSeq,
  };
}

/** Whether the drain is over (ready), must go on (wait), or failed. */
export function pollDrain(s: SwitchoverState, f: SwitchoverFacts): DrainStep {
  if (s.phase !== "draining") return { kind: "failed", why: "no switchover to drain" };
  const drained = f.appliedSeq >= f.lastSeq && f.heldReplies === 0 && !f.unnamed;
  if (drained) {
    return { kind: "ready", lastSeq: f.lastSeq, reuseDigest: f.lastSeq === s.announcedSeq };
  }
  if (f.nowMs > s.deadlineMs || !f.inSync) {
    return { kind: "failed", why: `standby at ${f.appliedSeq} of ${f.lastSeq}: not handing over` };
  }
  return { kind: "wait" };
}

/** The drain is over: hand over at `lastSeq` with `digest`, the standby given `timeoutMs`. */
export function handOver(
  s: SwitchoverState,
  nowMs: number,
  lastSeq: number,
  digest: string,
): SwitchoverState {
  if (s.phase !== "draining") return s;
  return {
    phase: "handing",
    startedMs: s.startedMs,
    deadlineMs: nowMs + s.timeoutMs,
    lastSeq,
    digest,
  };
}
