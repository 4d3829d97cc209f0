// A guest issuing small calls one at a time in the background, recording when each was sent
// and answered (wall-clock ms with sub-ms precision, comparable with the nodes' log times),
// to find the longest stall a guest saw within a stretch of time.
import { performance } from "node:perf_hooks";
import type { Client } from "./guest-workload.js";

export interface CallSample {
  readonly sentMs: number;
  readonly answeredMs: number;
}

export interface LatencySampler {
  /**
   * Stops after the call in flight, waiting for it at most `boundMs` (no bound by default): a
   * call still unanswered then is a sample answered at +Infinity. A call that failed ended the
   * sampling: stop() throws its error.
   */
  stop(boundMs?: number): Promise<CallSample[]>;
}

const wallMs = () => performance.timeOrigin + performance.now();

export function sampleLatency(client: Client): LatencySampler {
  const samples: CallSample[] = [];
  let stopping = false;
  let inFlightSentMs: number | undefined;
  let failure: { error: unknown } | undefined;
  const loop = (async () => {
    while (!stopping) {
      const sentMs = wallMs();
      inFlightSentMs = sentMs;
      await client.session.fence(client.context);
      inFlightSentMs = undefined;
      samples.push({ sentMs, answeredMs: wallMs() });
    }
  })().catch((error: unknown) => {
    failure = { error };
  });
  return {
    stop: async (boundMs = Number.POSITIVE_INFINITY) => {
      stopping = true;
      let timer: NodeJS.Timeout | undefined;
      const bound = Number.isFinite(boundMs)
        ? new Promise<void>((resolve) => {
            timer = setTimeout(resolve, boundMs);
          })
        : new Promise<void>(() => undefined);
      await Promise.race([loop, bound]);
      clearTimeout(timer);
      if (failure !== undefined) throw failure.error;
      const unanswered =
        inFlightSentMs === undefined
          ? []
          : [{ sentMs: inFlightSentMs, answeredMs: Number.POSITIVE_INFINITY }];
      return [...samples, ...unanswered];
    },
  };
}

export interface Stall {
  /** The longest wait, ms. */
  readonly maxMs: number;
  /** When that call was sent (wall-clock ms). */
  readonly atMs: number;
  /** Calls counted. */
  readonly calls: number;
}

/**
 * The longest part of a call that fell within [fromMs, toMs]: each call's wait is clipped to
 * the stretch, so a call that straddles its end counts only up to toMs.
 */
export function longestWithin(samples: readonly CallSample[], fromMs: number, toMs: number): Stall {
  let maxMs = 0;
  let atMs = Number.NaN;
  let calls = 0;
  for (const s of samples) {
    const waitMs = Math.min(s.answeredMs, toMs) - Math.max(s.sentMs, fromMs);
    if (waitMs < 0) continue;
    calls++;
    if (waitMs > maxMs) {
      maxMs = waitMs;
      atMs = s.sentMs;
    }
  }
  return { maxMs, atMs, calls };
}

/** The longest call answered within [fromMs, toMs] (whenever it was sent). */
export function longestAnswered(
  samples: readonly CallSample[],
  fromMs: number,
  toMs: number,
): Stall {
  let maxMs = 0;
  let atMs = Number.NaN;
  let calls = 0;
  for (const s of samples) {
    if (s.answeredMs < fromMs || s.answeredMs > toMs) continue;
    calls++;
    if (s.answeredMs - s.sentMs > maxMs) {
      maxMs = s.answeredMs - s.sentMs;
      atMs = s.sentMs;
    }
  }
  return { maxMs, atMs, calls };
}
