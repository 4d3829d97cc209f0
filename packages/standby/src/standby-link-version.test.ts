// Proves the standby refuses a hello from its peer that announces another replication protocol
// version: the stream never becomes live, the refusal names both versions (code
// INCOMPATIBLE_VERSION), the primary first gets this node's hello with its version and no epoch
// (so it refuses this node in turn), and status learns the peer's version. Same protocol,
// another package version: adopted (a rolling upgrade). The link is a recording fake.
import {
  createLogger,
  ErrorCode,
  type Link,
  type PrimaryMessage,
  type StandbyMessage,
} from "@vgpu-ha/common";
import { describe, expect, it } from "vitest";
import { Receiver } from "./core/receiver.js";
import { StandbyLink, type StreamRefusal } from "./standby-link.js";
import { testBackendOptions } from "./testing/backend-options.js";

const own = { version: "0.1.0", protocolVersion: 1 };

function recordingLink() {
  const sent: StandbyMessage[] = [];
  let onMessage: (m: PrimaryMessage) => void = () => {};
  let closedWith: string | undefined;
  const link: Link<StandbyMessage, PrimaryMessage> = {
    send: (m) => {
      sent.push(m);
      return true;
    },
    onMessage: (h) => {
      onMessage = h;
    },
    onDrain: () => {},
    onClose: () => {},
    close: (reason) => {
      closedWith = reason ?? "closed";
    },
  };
  return { link, sent, deliver: (m: PrimaryMessage) => onMessage(m), closed: () => closedWith };
}

function standby() {
  const receiver = new Receiver(
    {
      clusterId: "c",
      nodeId: "b",
      version: own,
      backendOptions: testBackendOptions(),
    },
    4,
  );
  const refusals: StreamRefusal[] = [];
  const link = new StandbyLink({
    receiver,
    logger: createLogger({ level: "silent", nodeId: "b", destination: process.stdout }),
    onStep: () => {},
    now: () => 0,
    identity: { clusterId: "c", nodeId: "b", peerName: "a", version: own },
    onRefused: (why) => refusals.push(why),
  });
  return { link, refusals };
}

const primaryHello = (
  version: string,
  protocolVersion: number,
): Extract<PrimaryMessage, { kind: "hello" }> => ({
  kind: "hello",
  epoch: 9,
  clusterId: "c",
  nodeId: "a",
  firstRetainedSeq: 1,
  lastSeq: 0,
  version,
  protocolVersion,
});

describe("StandbyLink version check", () => {
  it("refuses its peer of another protocol version, telling it this node's version", () => {
    const { link, refusals } = standby();
    const stream = recordingLink();
    link.acceptLink(stream.link);
    stream.deliver(primaryHello("0.2.0", 2));
    expect(link.connected).toBe(false);
    expect(stream.closed()).toBeDefined();
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatchObject({
      reason: "incompatible_version",
      code: ErrorCode.INCOMPATIBLE_VERSION,
    });
    expect(refusals[0]!.message).toContain("vgpud 0.2.0 (replication protocol 2)");
    expect(stream.sent).toEqual([
      expect.objectContaining({ kind: "hello", epoch: 0, nodeId: "b", ...own }),
      expect.objectContaining({ kind: "error", epoch: 0, code: ErrorCode.INCOMPATIBLE_VERSION }),
    ]);
    expect(link.peerVersion).toEqual({ version: "0.2.0", protocolVersion: 2 });
  });

  it("adopts its peer of the same protocol and another package version", () => {
    const { link, refusals } = standby();
    const stream = recordingLink();
    link.acceptLink(stream.link);
    stream.deliver(primaryHello("0.2.0", 1));
    expect(refusals).toEqual([]);
    expect(link.connected).toBe(true);
    expect(stream.sent[0]).toMatchObject({ kind: "hello", epoch: 4, ...own });
    expect(link.peerVersion).toEqual({ version: "0.2.0", protocolVersion: 1 });
  });

  it("learns nothing from a stranger's version", () => {
    const { link, refusals } = standby();
    const stream = recordingLink();
    link.acceptLink(stream.link);
    stream.deliver({ ...primaryHello("9.9.9", 9), nodeId: "x" });
    expect(refusals[0]?.reason).toBe("wrong_node");
    expect(stream.sent).toEqual([expect.objectContaining({ kind: "error", epoch: 0 })]);
    expect(link.peerVersion).toBeUndefined();
  });
});
