// Proves the replication identity rule: only peer.name of this cluster is accepted, another
// cluster is refused first, this node's own id is refused, and strangers' strings are clipped.
import { describe, expect, it } from "vitest";
import { ErrorCode } from "../errors.js";
import { identityRefusal, RefusalReason } from "./peer-identity.js";

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
