// Proves that counting a batch by runs of one kind (runsByKind) gives the per-kind entry and
// byte totals that counting entry by entry gave, for batches of mixed kinds in any order.
import { type Entry, entryBytes } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { runsByKind } from "./replication-client.js";

const open = (seq: number): Entry => ({
  seq,
  body: { kind: "sessionOpen", sessionId: `s${seq}`, tenant: "t" },
});
const close = (seq: number): Entry => ({
  seq,
  body: { kind: "sessionClose", sessionId: `session-${seq}`, reason: "guest" },
});

/** The totals counted one entry at a time, as the client did before. */
function perEntry(entries: readonly Entry[]): Map<string, { entries: number; bytes: number }> {
  const out = new Map<string, { entries: number; bytes: number }>();
  for (const e of entries) {
    const t = out.get(e.body.kind) ?? { entries: 0, bytes: 0 };
    t.entries++;
    t.bytes += entryBytes(e.body);
    out.set(e.body.kind, t);
  }
  return out;
}

function summed(runs: ReturnType<typeof runsByKind>) {
  const out = new Map<string, { entries: number; bytes: number }>();
  for (const r of runs) {
    const t = out.get(r.kind) ?? { entries: 0, bytes: 0 };
    t.entries += r.entries;
    t.bytes += r.bytes;
    out.set(r.kind, t);
  }
  return out;
}

describe("runsByKind", () => {
  it("gives nothing for an empty batch", () => {
    expect(runsByKind([])).toEqual([]);
  });

  it("makes one run of a batch of one kind", () => {
    const batch = [open(1), open(2), open(3)];
    expect(runsByKind(batch)).toEqual([
      { kind: "sessionOpen", entries: 3, bytes: batch.reduce((n, e) => n + entryBytes(e.body), 0) },
    ]);
  });

  it("matches per-entry counting on random mixed batches", () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let batch = 0; batch < 50; batch++) {
      const entries = Array.from({ length: Math.floor(random() * 40) }, (_, i) =>
        random() < 0.5 ? open(i + 1) : close(i + 1),
      );
      const runs = runsByKind(entries);
      expect(summed(runs)).toEqual(perEntry(entries));
      // Runs alternate kinds: two neighbours of one kind would be one run.
      for (let i = 1; i < runs.length; i++) expect(runs[i]!.kind).not.toBe(runs[i - 1]!.kind);
    }
  });
});
