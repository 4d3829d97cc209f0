// Proves the receiver's lineage rules (common core/lineage.ts): a replica whose lineage differs
// from its primary's is another history and is dropped at that primary's first hello whatever
// its length — equal, shorter or longer — so the hello says empty and a snapshot follows; one
// of the same lineage resumes; without a lineage on either side (a build from before them) only
// a replica longer than the primary's log is dropped, as before; a snapshot installs its
// primary's lineage, which the standby's hello then carries; and during a snapshot, the kept
// replica of another lineage is dropped while the snapshot goes on.
import type { StandbyMessage } from "@vgpu-ha/common/core";
import { Backend, SnapshotSource } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import {
  deviceTestOptions as options,
  primaryOfFive,
  testPrimaryHello,
} from "../testing/test-primary.js";
import { Receiver } from "./receiver.js";

/** A replica of lineage `lineage` that received and applied seqs 1..5 from a primary of it. */
function replicaOf(lineage: string) {
  const p = primaryOfFive();
  const r = new Receiver({ clusterId: "c", nodeId: "b", backendOptions: options(1) }, 1);
  const backend = new Backend(options(1));
  backend.lineage = lineage;
  r.adopt(backend, 0);
  r.step({ kind: "entries", epoch: 1, entries: p.entries });
  expect(r.receivedSeq).toBe(5);
  return { r, p };
}

const hello = (lastSeq: number, lineage?: string) =>
  testPrimaryHello({ lastSeq, ...(lineage === undefined ? {} : { lineage }) });

const helloOf = (m: StandbyMessage) => m as Extract<StandbyMessage, { kind: "hello" }>;
const events = (r: Receiver) => r.takeEvents().map((e) => `${e.kind}: ${e.detail}`);

describe("a replica meeting a primary of another lineage", () => {
  it.each([
    ["equal", 5],
    ["shorter", 9],
    ["longer", 3],
  ])("is dropped when its log is %s (primary's last seq %i): the hello says empty", (_, last) => {
    const { r } = replicaOf("history-x");
    const reply = helloOf(r.answerHello(hello(last, "history-y")));
    expect(reply).toMatchObject({ empty: true, lastAppliedSeq: 0 });
    expect(reply.lineage).toBeUndefined();
    expect(r.state).toBe("empty");
    expect(r.backend).toBeUndefined();
    expect(events(r)).toEqual([
      `foreignReplica: lineage history-x, not the primary's history-y (received 5, the primary's last seq ${last})`,
    ]);
  });

  it("of the same lineage resumes, and says its lineage", () => {
    const { r } = replicaOf("history-x");
    const reply = helloOf(r.answerHello(hello(9, "history-x")));
    expect(reply).toMatchObject({ empty: false, lastAppliedSeq: 5, lineage: "history-x" });
    expect(r.state).toBe("replica");
    expect(events(r)).toEqual([]);
  });

  it("without a lineage on either side, only a longer log tells (as before lineages)", () => {
    for (const [mine, theirs] of [
      ["history-x", undefined],
      ["", "history-y"],
    ] as const) {
      const equal = replicaOf(mine);
      expect(helloOf(equal.r.answerHello(hello(5, theirs))).empty).toBe(false);
      const longer = replicaOf(mine);
      expect(helloOf(longer.r.answerHello(hello(3, theirs))).empty).toBe(true);
      expect(events(longer.r)[0]).toContain("beyond the primary's last seq 3");
    }
  });
});

describe("a snapshot and the lineage", () => {
  it("installs its primary's lineage, which the standby's hello then carries", () => {
    const p = primaryOfFive();
    const r = new Receiver({ clusterId: "c", nodeId: "b", backendOptions: options(1) }, 1);
    r.answerHello(hello(5, "history-y"));
    const source = new SnapshotSource(p.backend, 1, 5, 4096);
    for (let c = source.next(); c !== undefined; c = source.next()) {
      r.step({ kind: "snapshot", epoch: 2, chunk: c });
      if (c.last) break;
    }
    expect(r.state).toBe("replica");
    expect(r.backend!.lineage).toBe("history-y");
    expect(helloOf(r.hello())).toMatchObject({ empty: false, lineage: "history-y" });
  });

  it("drops the kept replica of another lineage during a snapshot; the snapshot goes on", () => {
    const { r, p } = replicaOf("history-x");
    r.answerHello(hello(5, "history-x"));
    const source = new SnapshotSource(p.backend, 1, 5, 4096);
    r.step({ kind: "snapshot", epoch: 2, chunk: source.next()! }); // chunk 0 of several
    expect(r.state).toBe("snapshot");
    expect(r.backend).toBeDefined(); // kept for a takeover
    r.disconnected();
    r.answerHello(hello(5, "history-y")); // a primary of another history
    expect(r.backend).toBeUndefined();
    expect(r.state).toBe("snapshot");
    expect(events(r)).toContain(
      "foreignReplica: kept replica of lineage history-x, not the primary's history-y",
    );
  });
});
