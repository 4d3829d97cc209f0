// Proves a planned switchover's handover is not lost with a message or a stream: the Sender
// sends it once everything is sent, again on the next stream and again when no acceptance
// came within retransmitMs, never after the standby accepted it or the switchover was given up.
import { ReplicationLog, type StandbyMessage } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { testSenderOptions, testStandbyHello } from "../testing/sender-options.js";
import { Sender } from "./sender.js";

const options = testSenderOptions();

const hello = testStandbyHello();

const accepted: StandbyMessage = {
  kind: "ack",
  epoch: 1,
  receivedSeq: 0,
  appliedSeq: 0,
  snapshotId: 0,
  snapshotChunk: 0,
  heartbeatSentUs: 0,
  checkpoints: [],
  handoverAccepted: true,
};

function streaming(): Sender {
  const sender = new Sender(
    options,
    new ReplicationLog(),
    () => {
      throw new Error("no snapshot expected");
    },
    1,
  );
  sender.connected(0);
  sender.poll(0);
  sender.step(hello, 0);
  expect(sender.state).toBe("streaming");
  return sender;
}

const handovers = (sender: Sender, nowMs: number) =>
  sender.poll(nowMs).filter((m) => m.kind === "handover").length;

describe("the handover", () => {
  it("is sent once everything is, and again when no acceptance comes", () => {
    const sender = streaming();
    sender.handover("digest");
    expect(handovers(sender, 1)).toBe(1);
    expect(handovers(sender, 100)).toBe(0);
    expect(handovers(sender, 202)).toBe(1);
    sender.step(accepted, 210);
    expect(handovers(sender, 1000)).toBe(0);
  });

  it("is sent again on the next stream", () => {
    const sender = streaming();
    sender.handover("digest");
    expect(handovers(sender, 1)).toBe(1);
    sender.disconnected();
    sender.connected(5);
    sender.poll(5);
    sender.step(hello, 6);
    expect(handovers(sender, 7)).toBe(1);
  });

  it("is not sent once the switchover was given up", () => {
    const sender = streaming();
    sender.handover("digest");
    sender.cancelHandover();
    expect(handovers(sender, 1)).toBe(0);
    expect(handovers(sender, 500)).toBe(0);
  });
});
