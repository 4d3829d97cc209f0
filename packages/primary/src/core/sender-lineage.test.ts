// Proves the sender's side of lineages (common core/lineage.ts): its hello carries the
// primary's lineage (none when it has none), and a standby's hello naming a replica of another
// lineage is never resumed — whatever its applied seq, within the log or not — it gets a
// snapshot; the same lineage, or none on either side (a build from before them), resumes.
import {
  type PrimaryMessage,
  ReplicationLog,
  type SnapshotChunk,
  type StandbyMessage,
} from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { testSenderOptions, testStandbyHello } from "../testing/sender-options.js";
import { Sender, type SnapshotStream } from "./sender.js";

/** A sender of lineage `lineage` with seqs 1..4 in its log; counts the snapshots it starts. */
function sender(lineage: string) {
  const log = new ReplicationLog();
  for (let i = 0; i < 4; i++)
    log.append({ kind: "sessionClose", sessionId: `s${i}`, reason: "guest" }, 0);
  let snapshots = 0;
  const s = new Sender(
    testSenderOptions(),
    log,
    (): SnapshotStream => {
      const snapshotId = ++snapshots;
      let given = false;
      return {
        snapshotId,
        atSeq: 4,
        next(): SnapshotChunk | undefined {
          if (given) return undefined;
          given = true;
          return { snapshotId, atSeq: 4, index: 0, last: true, meta: undefined, pages: [] };
        },
        release() {},
      };
    },
    1,
  );
  s.lineage = lineage;
  s.connected(0);
  const hello = s.poll(0).find((m) => m.kind === "hello") as Extract<
    PrimaryMessage,
    { kind: "hello" }
  >;
  return { s, hello, snapshots: () => snapshots };
}

const standbyHello = (lastAppliedSeq: number, lineage?: string): StandbyMessage =>
  testStandbyHello({ lastAppliedSeq, ...(lineage === undefined ? {} : { lineage }) });

describe("the sender and lineages", () => {
  it("says its lineage in its hello (none when it has none)", () => {
    expect(sender("history-x").hello.lineage).toBe("history-x");
    expect(sender("").hello.lineage).toBeUndefined();
  });

  it.each([2, 4])("a replica of another lineage at seq %i gets a snapshot", (applied) => {
    const t = sender("history-x");
    t.s.step(standbyHello(applied, "history-y"), 1);
    expect(t.s.state).toBe("snapshot");
    expect(t.snapshots()).toBe(1);
    expect(t.s.takeEvents().map((e) => e.kind)).not.toContain("resumed");
  });

  it.each([
    ["the same lineage", "history-x", "history-x"],
    ["no lineage from the standby", "history-x", undefined],
    ["no lineage here", "", "history-y"],
  ] as const)("%s resumes", (_, mine, theirs) => {
    const t = sender(mine);
    t.s.step(standbyHello(2, theirs), 1);
    expect(t.s.state).toBe("streaming");
    expect(t.snapshots()).toBe(0);
    expect(t.s.takeEvents()).toContainEqual({ kind: "resumed", fromSeq: 3 });
  });
});
