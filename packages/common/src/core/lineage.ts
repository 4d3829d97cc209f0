// Lineages: which history a node's state belongs to. A primary that starts a history (it starts
// with nothing: a cold start, a pair started afresh, a forced promotion of an empty standby)
// makes a random id; the id stays with the state (a Backend's `lineage`) through snapshots,
// takeovers and handovers, and both hellos carry it. A replica of another lineage than its
// primary's is another history — another pair's, or one that forked from this pair's when a
// node started afresh — whatever its length, and is never resumed or taken over with.

/** Longest lineage a hello may carry (a UUID is 36 characters). */
export const LINEAGE_MAX_CHARS = 64;

/**
 * Whether a replica of lineage `replica` belongs to another history than a primary of lineage
 * `primary`. "" (unknown: a build from before lineages, or a state made before it was set)
 * proves nothing: only the lengths can tell then.
 */
export function otherLineage(replica: string, primary: string): boolean {
  return replica !== "" && primary !== "" && replica !== primary;
}
