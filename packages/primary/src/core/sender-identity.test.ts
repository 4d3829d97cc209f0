// Proves the sender believes nothing — above all no epoch — from the other end of a connection
// until that end's hello names the configured peer of this cluster: a stranger at the peer's
// address (another pair's standby, a forged answer) cannot make the primary step down.
import { ErrorCode, ReplicationLog, type StandbyMessage } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { testSenderOptions, testStandbyHello } from "../testing/sender-options.js";
import { Sender } from "./sender.js";

const options = testSenderOptions();

const hello = testStandbyHello;

function connected(): Sender {
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
  return sender;
}

describe("the sender's peer check", () => {
  it.each([
    [
      "an error of a higher epoch before any hello",
      { kind: "error", epoch: 1001, code: ErrorCode.STALE_EPOCH, message: "x" } as StandbyMessage,
      "no_hello",
    ],
    [
      "another cluster's hello of a higher epoch",
      hello({ clusterId: "other", epoch: 1001 }),
      "wrong_cluster",
    ],
    [
      "a hello naming another node of a higher epoch",
      hello({ nodeId: "x", epoch: 1001 }),
      "wrong_node",
    ],
    ["a hello naming this node itself", hello({ nodeId: "a", epoch: 7 }), "own_node_id"],
  ] as const)("ignores %s", (_, message, reason) => {
    const sender = connected();
    sender.step(message, 1);
    const events = sender.takeEvents();
    expect(events.some((e) => e.kind === "higherEpoch")).toBe(false);
    expect(events).toContainEqual(expect.objectContaining({ kind: "refused", reason }));
    expect(sender.state).toBe("hello");
    // Still unverified: a later ack is not believed either.
    sender.step(
      {
        kind: "ack",
        epoch: 1,
        receivedSeq: 0,
        appliedSeq: 0,
        snapshotId: 0,
        snapshotChunk: 0,
        heartbeatSentUs: 5,
        checkpoints: [],
        handoverAccepted: false,
      },
      2,
    );
    expect(sender.takeEvents()).toContainEqual(
      expect.objectContaining({ kind: "refused", reason: "no_hello" }),
    );
  });

  it("takes its own peer's higher epoch once the peer has named itself", () => {
    const sender = connected();
    sender.step(hello({ epoch: 3 }), 1);
    expect(sender.takeEvents()).toContainEqual({ kind: "higherEpoch", epoch: 3 });
  });

  it("verifies again on every new connection", () => {
    const sender = connected();
    sender.step(hello({}), 1);
    expect(sender.state).toBe("streaming");
    sender.disconnected();
    sender.connected(2);
    sender.step(hello({ clusterId: "other", epoch: 9 }), 3);
    expect(sender.takeEvents().some((e) => e.kind === "higherEpoch")).toBe(false);
  });
});
