// Proves the replication identity rule: only peer.name of this cluster is accepted, another
// cluster is refused first, this node's own id is refused, and strangers' strings are clipped;
// a hello from the peer is also refused when it announces another protocol version, naming both.
import { describe, expect, it } from "vitest";
import { ErrorCode } from "../errors.js";
import { helloRefusal, identityRefusal, RefusalReason, refusalReply } from "./peer-identity.js";
import { REPLICATION_PROTOCOL_VERSION } from "./peer-version.js";

const rule = { clusterId: "c1", nodeId: "node-a", peerName: "node-b" };

describe("identityRefusal", () => {
  it("accepts the configured peer of this cluster", () => {
    expect(identityRefusal(rule, { clusterId: "c1", nodeId: "node-b" })).toBeNull();
  });

  it("refuses another cluster before looking at the node id", () => {
    const r = identityRefusal(rule, { clusterId: "c2", nodeId: "node-b" });
    expect(r?.reason).toBe(RefusalReason.wrongCluster);
    expect(r?.code).toBe(ErrorCode.WRONG_CLUSTER);
    expect(identityRefusal(rule, { clusterId: "", nodeId: "" })?.reason).toBe("wrong_cluster");
  });

  it("refuses an unknown node id and this node's own id", () => {
    expect(identityRefusal(rule, { clusterId: "c1", nodeId: "node-x" })).toMatchObject({
      reason: RefusalReason.wrongNode,
      code: ErrorCode.WRONG_PEER,
    });
    expect(identityRefusal(rule, { clusterId: "c1", nodeId: "node-a" })?.reason).toBe(
      RefusalReason.ownNodeId,
    );
  });

  it("clips a stranger's long strings in the message", () => {
    const r = identityRefusal(rule, { clusterId: "x".repeat(10_000), nodeId: "n" });
    expect(r!.message.length).toBeLessThan(200);
  });
});

describe("helloRefusal", () => {
  const versioned = { ...rule, version: { version: "0.1.0", protocolVersion: 1 } };
  const hello = { clusterId: "c1", nodeId: "node-b" };

  it("accepts the peer of the same protocol, whatever its package version", () => {
    expect(helloRefusal(versioned, { ...hello, version: "0.2.0", protocolVersion: 1 })).toBeNull();
    expect(helloRefusal(versioned, hello)).toBeNull(); // a build that did not say: protocol 1
  });

  it("refuses the peer of another protocol with both versions in the reason", () => {
    const r = helloRefusal(versioned, { ...hello, version: "0.2.0", protocolVersion: 2 });
    expect(r).toMatchObject({
      reason: RefusalReason.incompatibleVersion,
      code: ErrorCode.INCOMPATIBLE_VERSION,
      versions: {
        own: { version: "0.1.0", protocolVersion: 1 },
        peer: { version: "0.2.0", protocolVersion: 2 },
      },
    });
    expect(r!.message).toContain("vgpud 0.2.0 (replication protocol 2)");
    expect(r!.message).toContain("vgpud 0.1.0 (replication protocol 1)");
  });

  it("checks who it is before the version: a stranger learns nothing of ours", () => {
    const r = helloRefusal(versioned, { clusterId: "c2", nodeId: "node-b", protocolVersion: 9 });
    expect(r?.reason).toBe(RefusalReason.wrongCluster);
    expect(r?.versions).toBeUndefined();
  });

  it("takes this build's protocol when the rule names no version", () => {
    const own = REPLICATION_PROTOCOL_VERSION;
    expect(helloRefusal(rule, { ...hello, protocolVersion: own })).toBeNull();
    expect(helloRefusal(rule, { ...hello, protocolVersion: own + 1 })?.reason).toBe(
      "incompatible_version",
    );
  });
});

describe("refusalReply", () => {
  const self = {
    clusterId: "c1",
    nodeId: "node-a",
    version: { version: "0.1.0", protocolVersion: 1 },
  };

  it("tells a stranger only the error, without an epoch", () => {
    const why = identityRefusal(rule, { clusterId: "c1", nodeId: "node-x" })!;
    expect(refusalReply(self, why)).toEqual([
      { kind: "error", epoch: 0, code: ErrorCode.WRONG_PEER, message: why.message },
    ]);
  });

  it("tells its peer of another protocol this node's version first, still without an epoch", () => {
    const why = helloRefusal(
      { ...rule, version: self.version },
      { clusterId: "c1", nodeId: "node-b", protocolVersion: 2 },
    )!;
    const [hello, error] = refusalReply(self, why);
    expect(hello).toMatchObject({ kind: "hello", epoch: 0, nodeId: "node-a", ...self.version });
    expect(error).toMatchObject({ kind: "error", epoch: 0, code: ErrorCode.INCOMPATIBLE_VERSION });
  });
});
