// Proves the replication log keeps applied entries as packed bytes in slabs
// (retained-slabs.ts) and reads them back equal to what was appended, for entries of every
// kind, large payloads and entries larger than a slab included; that retainBytes bounds the
// heap the slabs really take, dropping the oldest first and never an entry the standby has not
// applied; that an entry the encoding cannot hold exactly stays an object; that a small call costs a small fraction of its old ~600 B of objects; and that lag
// is still measured in wire bytes (entryBytes), across dropped entries.
import { describe, expect, it } from "vitest";
import { type Entry, type EntryBody, entryBytes } from "./entries.js";
import { ReplicationLog } from "./log.js";

const fence = (frame: number, session = 0): EntryBody => ({
  kind: "call",
  sessionId: `0b7c6f1e-5d4a-4c1b-9a43-3e2f1d0c9b8${session}`,
  frame,
  call: { op: "fence", context: 1 },
  handles: { contextsCreated: [], contextsDestroyed: [], bosAssigned: [], bosReleased: [] },
  result: { code: 0, outputDigest: new Uint8Array(9).fill(frame & 0xff) },
});

const bodies = (frame: number): EntryBody[] => [
  fence(frame, frame % 8),
  {
    kind: "call",
    sessionId: "s1",
    frame,
    call: {
      op: "kernelLaunch",
      context: 3,
      kernel: "saxpy_f32",
      args: [
        { kind: "buffer", bo: 7 },
        { kind: "f32", value: 1.5 },
        { kind: "i32", value: -frame },
      ],
    },
    handles: { contextsCreated: [], contextsDestroyed: [], bosAssigned: [], bosReleased: [] },
    result: { code: 0, outputDigest: new Uint8Array(0) },
  },
  {
    kind: "call",
    sessionId: "s2",
    frame,
    call: { op: "dmaWrite", context: 1, bo: 2, offset: 64, data: new Uint8Array(3000).fill(7) },
    handles: { contextsCreated: [], contextsDestroyed: [], bosAssigned: [], bosReleased: [] },
    result: { code: 0, outputDigest: new Uint8Array(0) },
  },
  {
    kind: "mmioPages",
    pages: [
      {
        context: 1,
        bo: 2,
        pageIndex: 3,
        extents: [{ offsetInPage: 8, data: Uint8Array.of(1, 2) }],
      },
    ],
    frames: [{ sessionId: "s1", frame, code: 0, message: "" }],
  },
  { kind: "sessionOpen", sessionId: `session-${frame}`, tenant: "acme" },
  { kind: "sessionClose", sessionId: `session-${frame}`, reason: "idle" },
  { kind: "checkpoint", digest: `digest-${frame}`, requestId: frame },
];

function logOf(count: number, body: (i: number) => EntryBody = fence): ReplicationLog {
  const log = new ReplicationLog();
  for (let i = 1; i <= count; i++) log.append(body(i), i);
  return log;
}

const wire = entryBytes(fence(1));

describe("ReplicationLog retention", () => {
  it("reads retained entries of every kind back equal to those appended", () => {
    const all = Array.from({ length: 40 }, (_, i) => bodies(i + 1)).flat();
    const log = new ReplicationLog();
    const appended: Entry[] = all.map((body, i) => log.append(body, i));
    log.release(200, 1024 * 1024);
    expect(log.heldEntries).toBe(all.length);
    expect(log.read(1, 1000, Number.POSITIVE_INFINITY)).toEqual(appended);
    expect(log.read(150, 3, Number.POSITIVE_INFINITY)).toEqual(appended.slice(149, 152));
  });

  it("keeps an entry larger than a slab", () => {
    const log = new ReplicationLog();
    const big: EntryBody = {
      kind: "mmioStore",
      context: 1,
      bo: 2,
      offset: 0,
      data: new Uint8Array(16 * 1024).map((_, i) => i),
      frames: [],
    };
    const a = log.append(fence(1), 0);
    const b = log.append(big, 0);
    const c = log.append(fence(3), 0);
    log.release(3, 64 * 1024); // slabs of 8 KiB
    expect(log.read(1, 10, Number.POSITIVE_INFINITY)).toEqual([a, b, c]);
  });

  it("keeps an entry the encoding cannot hold exactly as its object", () => {
    const log = new ReplicationLog();
    const odd: EntryBody = {
      kind: "call",
      sessionId: "s",
      frame: 2,
      call: { op: "boAlloc", context: 1, sizeBytes: 1.5 }, // a simulator's invalid call
      handles: { contextsCreated: [], contextsDestroyed: [], bosAssigned: [], bosReleased: [] },
      result: { code: 5, outputDigest: new Uint8Array(0) },
    };
    const entries = [log.append(fence(1), 0), log.append(odd, 0), log.append(fence(3), 0)];
    log.release(3, 1024 * 1024);
    const read = log.read(1, 10, Number.POSITIVE_INFINITY);
    expect(read).toEqual(entries);
    expect(read[1]).toBe(entries[1]);
  });

  it("holds a small call in a small fraction of its objects' heap", () => {
    const log = logOf(20_000, (i) => fence(i, i % 8));
    log.release(20_000, 1024 * 1024); // slabs of 64 KiB: the last one not full
    expect(log.heldEntries).toBe(20_000);
    expect(log.retainedHeapBytes / 20_000).toBeLessThan(50);
  });

  it("drops the oldest slabs while the slabs take more than retainBytes", () => {
    const budget = 256 * 1024;
    const log = logOf(20_000, (i) => fence(i, i % 8));
    log.release(20_000, budget);
    expect(log.retainedHeapBytes).toBeLessThanOrEqual(budget);
    // At most one slab (an eighth of the budget) short of the budget.
    expect(log.retainedHeapBytes).toBeGreaterThan((budget * 3) / 4);
    const first = log.firstRetainedSeq;
    expect(first).toBeGreaterThan(1);
    expect(log.heldEntries).toBe(20_000 - first + 1);
    expect(log.read(first, 2, Number.POSITIVE_INFINITY).map((e) => e.seq)).toEqual([
      first,
      first + 1,
    ]);
    expect(log.read(20_000, 1, 0)).toEqual([{ seq: 20_000, body: fence(20_000, 0) }]);
  });

  it("never drops an entry the standby has not applied", () => {
    const log = logOf(100);
    log.release(40, 0);
    expect(log.firstRetainedSeq).toBe(41);
    log.release(40, 0);
    expect(log.firstRetainedSeq).toBe(41);
    log.release(60, 1024 * 1024);
    expect(log.firstRetainedSeq).toBe(41);
    log.release(100, 100);
    expect(log.firstRetainedSeq).toBe(101);
  });

  it("drops retained entries before newer ones when retainBytes falls to 0", () => {
    const log = logOf(100);
    log.release(50, 1024 * 1024);
    log.release(80, 0);
    expect(log.firstRetainedSeq).toBe(81);
    expect(log.heldEntries).toBe(20);
    expect(log.heldBytes).toBe(20 * wire);
    expect(log.bytesBetween(0, 100)).toBe(20 * wire);
  });

  it("measures lag in wire bytes, across retained and dropped entries", () => {
    const log = logOf(100);
    log.release(30, 0);
    log.release(50, 1024 * 1024);
    expect(log.lagAfter(50, 100)).toEqual({ entries: 50, bytes: 50 * wire, seconds: 0.049 });
    expect(log.lagAfter(40, 100)).toEqual({ entries: 60, bytes: 60 * wire, seconds: 0.059 });
    expect(log.bytesBetween(0, 100)).toBe(70 * wire);
    expect(log.heldBytes).toBe(70 * wire);
  });
});
