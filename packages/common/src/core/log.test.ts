// Proves the replication log's retention counts entries by their heap cost (entryHeapBytes),
// not their wire bytes: applied entries are dropped oldest first until those kept cost at most
// retainBytes, entries the standby has not applied are never dropped, and lag is still
// measured in wire bytes (entryBytes).
import { describe, expect, it } from "vitest";
import { type EntryBody, entryBytes, entryHeapBytes } from "./entries.js";
import { ReplicationLog } from "./log.js";

const fence = (frame: number): EntryBody => ({
  kind: "call",
  sessionId: "0b7c6f1e-5d4a-4c1b-9a43-3e2f1d0c9b8a",
  frame,
  call: { op: "fence", context: 1 },
  handles: { contextsCreated: [], contextsDestroyed: [], bosAssigned: [], bosReleased: [] },
  result: { code: 0, outputDigest: new Uint8Array(9) },
});

function logOf(count: number): ReplicationLog {
  const log = new ReplicationLog();
  for (let i = 1; i <= count; i++) log.append(fence(i), i);
  return log;
}

describe("ReplicationLog retention", () => {
  const heap = entryHeapBytes(fence(1));
  const wire = entryBytes(fence(1));

  it("counts a small entry's heap, several times its wire bytes", () => {
    expect(wire).toBe(100);
    expect(heap).toBeGreaterThanOrEqual(4 * wire);
  });

  it("keeps the newest applied entries whose heap fits retainBytes", () => {
    const log = logOf(100);
    log.release(100, 10 * heap);
    expect(log.firstRetainedSeq).toBe(91);
    expect(log.heldEntries).toBe(10);
    expect(log.heldBytes).toBe(10 * wire);
  });

  it("never drops an entry the standby has not applied", () => {
    const log = logOf(100);
    log.release(40, 0);
    expect(log.firstRetainedSeq).toBe(41);
    log.release(40, 0);
    expect(log.firstRetainedSeq).toBe(41);
    log.release(100, heap - 1);
    expect(log.firstRetainedSeq).toBe(101);
  });

  it("measures lag in wire bytes, across dropped entries", () => {
    const log = logOf(100);
    log.release(50, 5 * heap);
    expect(log.lagAfter(50, 100)).toEqual({ entries: 50, bytes: 50 * wire, seconds: 0.049 });
    expect(log.bytesBetween(0, 100)).toBe(55 * wire);
  });
});
