// Lease trouble seen in the nodes' logs during a benchmark: a primary fencing itself because
// acknowledgements stopped renewing its lease, a standby promoting itself, a primary stepping
// down. A benchmark only measures a pair that stayed a pair; these counts say whether it did.
import type { NodeProcess } from "./node-process.js";

export interface LeaseEvents {
  /** "lease lapsed: holding replies (fenced)" on a primary. */
  readonly lapses: number;
  /** "promoting: the primary's lease expired" on a standby. */
  readonly promotions: number;
  /** "stepping down to standby: …" on a primary. */
  readonly stepDowns: number;
  /** Time fenced (replies held), lapse to "lease held" again, from log times (ms). */
  readonly fencedMs: number;
  readonly longestFencedMs: number;
}

const tally = new Map<string, LeaseEvents>();

/** Counts the lease events in the logs of `nodes` (call before stopping them) under `label`. */
export function tallyLeaseEvents(label: string, nodes: readonly NodeProcess[]): LeaseEvents {
  let lapses = 0;
  let promotions = 0;
  let stepDowns = 0;
  let fencedMs = 0;
  let longestFencedMs = 0;
  for (const node of nodes) {
    let lapsedAtMs: number | undefined;
    for (const line of node.logLines()) {
      const msg = String(line.msg ?? "");
      const atMs = Date.parse(String(line.time));
      if (msg.startsWith("lease lapsed")) {
        lapses++;
        lapsedAtMs = atMs;
      } else if (msg.startsWith("lease held") && lapsedAtMs !== undefined) {
        fencedMs += atMs - lapsedAtMs;
        longestFencedMs = Math.max(longestFencedMs, atMs - lapsedAtMs);
        lapsedAtMs = undefined;
      } else if (msg.startsWith("promoting")) {
        promotions++;
      } else if (msg.startsWith("stepping down")) {
        stepDowns++;
      }
    }
  }
  const events = { lapses, promotions, stepDowns, fencedMs, longestFencedMs };
  tally.set(label, events);
  return events;
}

/** Everything tallied so far, by label. */
export function leaseEventTally(): ReadonlyMap<string, LeaseEvents> {
  return tally;
}
