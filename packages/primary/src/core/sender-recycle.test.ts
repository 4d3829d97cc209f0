// Proves when the Sender hands a snapshot chunk back for its memory to be reused: only once
// the standby acknowledged it, only when the standby pulls (the chunk was encoded onto the
// pull's stream), never a chunk still unacknowledged, and never on an in-process link (whose
// receiver may still read the chunk it was given).
import { ReplicationLog, type SnapshotChunk } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { testSenderOptions, testSnapshotAck, testStandbyHello } from "../testing/sender-options.js";
import { Sender, type SnapshotStream } from "./sender.js";

const options = testSenderOptions({ snapshotWindowChunks: 3, retransmitMs: 10_000 });

function recordingStream(recycled: number[]): () => SnapshotStream {
  return () => {
    let index = 0;
    return {
      snapshotId: 1,
      atSeq: 0,
      next(): SnapshotChunk | undefined {
        if (index >= 5) return undefined;
        const i = index++;
        return { snapshotId: 1, atSeq: 0, index: i, last: i === 4, meta: undefined, pages: [] };
      },
      release() {},
      recycle(chunk) {
        recycled.push(chunk.index);
      },
    };
  };
}

const ack = testSnapshotAck;

function run(pullsSnapshots: boolean): number[] {
  const recycled: number[] = [];
  const sender = new Sender(options, new ReplicationLog(), recordingStream(recycled), 1);
  sender.connected(0);
  sender.poll(0);
  sender.step(testStandbyHello({ empty: true, pullsSnapshots }), 1);
  sender.poll(2); // chunks 0-2 out, none acknowledged
  expect(recycled).toEqual([]);
  sender.step(ack(2), 3);
  sender.poll(4);
  sender.step(ack(4), 5);
  return recycled;
}

describe("recycling acknowledged snapshot chunks", () => {
  it("hands back each acknowledged chunk once, in order, when the standby pulls", () => {
    expect(run(true)).toEqual([0, 1, 2, 3]);
  });

  it("hands back nothing when the chunks went on the link itself", () => {
    expect(run(false)).toEqual([]);
  });
});
