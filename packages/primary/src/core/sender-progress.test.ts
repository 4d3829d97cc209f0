// Proves what the Sender reports for operators: a snapshot's doneBytes counts only chunks the
// standby acknowledged (the coverage the stream had when each was produced), reaching the
// total; and every heartbeat carries the maintenance flag the node set.
import { ReplicationLog, type SnapshotChunk, type StandbyMessage } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { testSenderOptions, testSnapshotAck, testStandbyHello } from "../testing/sender-options.js";
import { Sender, type SnapshotStream } from "./sender.js";

const options = testSenderOptions({ snapshotWindowChunks: 2, retransmitMs: 10_000 });

/** Four chunks, each covering 1000 more bytes of a 4000-byte snapshot. */
function fakeStream(): SnapshotStream {
  let index = 0;
  const stream = {
    snapshotId: 1,
    atSeq: 0,
    totalBytes: 4000,
    coveredBytes: 0,
    next(): SnapshotChunk | undefined {
      if (index >= 4) return undefined;
      const i = index++;
      stream.coveredBytes = (i + 1) * 1000;
      return { snapshotId: 1, atSeq: 0, index: i, last: i === 3, meta: undefined, pages: [] };
    },
    release() {},
  };
  return stream;
}

const emptyHello: StandbyMessage = testStandbyHello({ empty: true });

const ack = testSnapshotAck;

describe("the sender's operator figures", () => {
  it("counts snapshot bytes as done only once their chunk is acknowledged", () => {
    const sender = new Sender(options, new ReplicationLog(), fakeStream, 1);
    sender.connected(0);
    sender.poll(0);
    sender.step(emptyHello, 1);
    expect(sender.state).toBe("snapshot");
    sender.poll(2); // a window of two chunks goes out: 2000 bytes covered, none acknowledged
    expect(sender.snapshotProgress).toMatchObject({ totalBytes: 4000, doneBytes: 0 });
    sender.step(ack(1), 3);
    expect(sender.snapshotProgress?.doneBytes).toBe(1000);
    sender.poll(4);
    sender.step(ack(3), 5);
    expect(sender.snapshotProgress?.doneBytes).toBe(3000);
    expect(sender.snapshotProgress?.startedMs).toBe(1);
  });

  it("carries the maintenance flag on every heartbeat", () => {
    const sender = new Sender(options, new ReplicationLog(), fakeStream, 1);
    sender.connected(0);
    sender.poll(0);
    sender.step(testStandbyHello({ empty: false }), 1);
    const beats = (now: number) => sender.poll(now).filter((m) => m.kind === "heartbeat");
    expect(beats(200)).toMatchObject([{ maintenancePaused: false }]);
    sender.maintenancePaused = true;
    expect(beats(400)).toMatchObject([{ maintenancePaused: true }]);
  });
});
