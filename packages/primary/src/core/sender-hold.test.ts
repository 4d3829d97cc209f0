// Proves the sender's side of the standby's hold: with holdStandby every entry batch carries
// the device done seq (never above what the standby was sent nor the log as it was when the
// device said so — an entry appended later is not done by it — never backwards when the device's
// own figure dips under a later digest's hashing), a batch with no entries goes out when only
// the done seq advanced, a heartbeat repeats it while the standby has not applied up to it (a
// lost copy), and without holdStandby no batch carries it (the standby then applies on receipt).
import { type PrimaryMessage, ReplicationLog } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { testSenderOptions, testStandbyHello } from "../testing/sender-options.js";
import { Sender, type SnapshotStream } from "./sender.js";

const noSnapshot = (): SnapshotStream => {
  throw new Error("no snapshot in these tests");
};

function streaming(holdStandby: boolean, done: { seq: number }) {
  const log = new ReplicationLog();
  for (let i = 0; i < 3; i++)
    log.append({ kind: "sessionOpen", sessionId: `s${i}`, tenant: "t" }, 0);
  const sender = new Sender(
    testSenderOptions({ holdStandby, deviceDoneSeq: () => done.seq, retransmitMs: 10_000 }),
    log,
    noSnapshot,
    1,
  );
  sender.connected(0);
  sender.poll(0);
  sender.step(testStandbyHello(), 0);
  expect(sender.state).toBe("streaming");
  return { sender, log };
}

const batches = (out: PrimaryMessage[]) =>
  out.filter((m): m is Extract<PrimaryMessage, { kind: "entries" }> => m.kind === "entries");

describe("the done seq a holding primary sends", () => {
  it("rides on every batch, capped at what was sent, and alone when only it advanced", () => {
    const done = { seq: 1 };
    const { sender, log } = streaming(true, done);
    const first = batches(sender.poll(1));
    // The entries with the done seq, then the first heartbeat's repeat (nothing applied yet).
    expect(first.map((b) => [b.entries.length, b.primaryDoneSeq])).toEqual([
      [3, 1],
      [0, 1],
    ]);
    expect(batches(sender.poll(2))).toEqual([]); // nothing new
    done.seq = 5; // idle, the device counts a pending page batch's seq as done: capped at 3
    expect(batches(sender.poll(3)).map((b) => [b.entries.length, b.primaryDoneSeq])).toEqual([
      [0, 3],
    ]);
    done.seq = 2; // a digest's hashing holds the device's figure back a while: never backwards
    log.append({ kind: "sessionOpen", sessionId: "s9", tenant: "t" }, 0);
    expect(batches(sender.poll(4)).map((b) => [b.entries.length, b.primaryDoneSeq])).toEqual([
      [1, 3],
    ]);
  });

  it("is repeated with the heartbeat while the standby has not applied up to it", () => {
    const done = { seq: 3 };
    const { sender } = streaming(true, done);
    sender.poll(1);
    const beat = sender.poll(200); // a heartbeat is due; the standby acked nothing yet
    expect(beat.map((m) => m.kind)).toEqual(["heartbeat", "entries"]);
    expect(batches(beat)[0]).toMatchObject({ entries: [], primaryDoneSeq: 3 });
    sender.step(
      {
        kind: "ack",
        epoch: 1,
        receivedSeq: 3,
        appliedSeq: 3,
        snapshotId: 0,
        snapshotChunk: 0,
        heartbeatSentUs: 0,
        checkpoints: [],
      },
      201,
    );
    expect(sender.poll(400).map((m) => m.kind)).toEqual(["heartbeat"]);
  });

  it("is never sent without holdStandby", () => {
    const { sender } = streaming(false, { seq: 3 });
    const out = batches(sender.poll(1));
    expect(out).toHaveLength(1);
    expect(out[0]!.primaryDoneSeq).toBeUndefined();
    expect(batches(sender.poll(200))).toEqual([]);
  });
});
