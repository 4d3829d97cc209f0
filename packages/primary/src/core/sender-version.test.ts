// Proves the sender announces this node's version in its hello and refuses a standby hello of
// another protocol version — counted once per connection (the standby's error that follows is
// not counted again as no_hello), its epoch not believed — while a standby of the same protocol
// and another package version streams (a rolling upgrade). peerVersion records what it runs.
import { ErrorCode, ReplicationLog } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { testSenderOptions, testStandbyHello } from "../testing/sender-options.js";
import { Sender } from "./sender.js";

const own = { version: "0.1.0", protocolVersion: 1 };

function connected(): Sender {
  const sender = new Sender(
    testSenderOptions({ version: own }),
    new ReplicationLog(),
    () => {
      throw new Error("no snapshot expected");
    },
    1,
  );
  sender.connected(0);
  return sender;
}

describe("the sender's version check", () => {
  it("announces this node's version and protocol in its hello", () => {
    expect(connected().poll(0)).toEqual([expect.objectContaining({ kind: "hello", ...own })]);
  });

  it("refuses a standby of another protocol once, and believes nothing it says", () => {
    const sender = connected();
    sender.poll(0);
    sender.step(testStandbyHello({ epoch: 50, version: "0.2.0", protocolVersion: 2 }), 1);
    sender.step({ kind: "error", epoch: 0, code: ErrorCode.INCOMPATIBLE_VERSION, message: "x" }, 1);
    const events = sender.takeEvents();
    expect(events).toEqual([
      expect.objectContaining({
        kind: "refused",
        reason: "incompatible_version",
        code: ErrorCode.INCOMPATIBLE_VERSION,
      }),
    ]);
    expect(sender.state).toBe("hello");
    expect(sender.peerVersion).toEqual({ version: "0.2.0", protocolVersion: 2 });
  });

  it("streams to a standby of the same protocol and another package version", () => {
    const sender = connected();
    sender.poll(0);
    sender.step(testStandbyHello({ version: "0.0.9", protocolVersion: 1 }), 1);
    expect(sender.state).toBe("streaming");
    expect(sender.peerVersion).toEqual({ version: "0.0.9", protocolVersion: 1 });
  });

  it("counts a later connection's refusal again", () => {
    const sender = connected();
    sender.step(testStandbyHello({ protocolVersion: 2 }), 1);
    sender.disconnected();
    sender.connected(2);
    sender.step(testStandbyHello({ protocolVersion: 2 }), 3);
    const refused = sender.takeEvents().filter((e) => e.kind === "refused");
    expect(refused).toHaveLength(2);
  });
});
