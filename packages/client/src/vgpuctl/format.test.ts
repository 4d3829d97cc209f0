// Proves the status table's wording: "degraded" appears once, a primary without a standby shows
// "no standby" as its lag, the mode and TLS columns, and the lines under the table (last role
// change, maintenance, a resync with its figures; a bar only on a terminal), each node's version
// and its peer's when it differs (INCOMPATIBLE when the protocol does), and the nodes' lineages
// only when they differ.
import { describe, expect, it } from "vitest";
import { lineageLine, peerVersionLine, renderDetails, renderTable, stateOf } from "./format.js";
import type { NodeStatus, NodeView } from "./ops-client.js";

const primary = (over: Partial<NodeStatus> = {}): NodeStatus => ({
  nodeId: "node-a",
  role: "primary",
  epoch: 3,
  degraded: true,
  replicationMode: "sync",
  tls: { replication: true, guest: "off" },
  lease: { state: "degraded", remainingSeconds: 0 },
  seq: { last: 10, applied: 4, acknowledged: 10 },
  replication: { state: "disconnected", connected: false, lag: null },
  sessions: 1,
  vram: { usedBytes: 0, totalBytes: 1 << 30 },
  ...over,
});

const view = (status: NodeStatus): NodeView => ({
  url: "http://127.0.0.1:9400",
  status,
  ready: { ready: true, reason: "" },
});

describe("status table", () => {
  it("says degraded once", () => {
    expect(stateOf(primary())).toBe("degraded/disconnected");
    const fenced = primary({ lease: { state: "fenced", remainingSeconds: 0 } });
    expect(stateOf(fenced)).toBe("fenced/disconnected degraded");
  });

  it("shows 'no standby' instead of a lag, and the mode and TLS", () => {
    const table = renderTable([view(primary())]);
    expect(table.split("\n")[0]).toMatch(/MODE\s+TLS\s+LEASE\/STATE/);
    expect(table).toMatch(/node-a .* sync\s+on\s+degraded\/disconnected\s+10\/4\s+no standby/);
  });

  it("puts the last role change, maintenance and a resync under the table", () => {
    const s = primary({
      lastRoleChange: {
        at: "2026-01-01T00:00:00.000Z",
        node: "node-a",
        epoch: 3,
        from: "standby",
        to: "primary",
        reason: "lease_expired",
        seq: 4,
        by: "automatic",
        ageSeconds: 125,
      },
      maintenance: { paused: true, pausedSeconds: 30, by: "operator 10.0.0.9" },
      replication: {
        state: "snapshot",
        connected: true,
        peer: "node-b",
        lag: { entries: 6 },
        snapshot: {
          totalBytes: 4 << 20,
          doneBytes: 1 << 20,
          percent: 25,
          rateBytesPerSecond: 1 << 20,
          etaSeconds: 3,
        },
      },
    });
    const plain = renderDetails([view(s)], false).split("\n");
    expect(plain).toEqual([
      "node-a: primary for 2 min 5 s (lease_expired, from standby, by automatic, epoch 3)",
      "node-a: MAINTENANCE: paused for 30 s by operator 10.0.0.9: no automatic failover (vgpuctl resume)",
      "resync node-a → node-b: 25.0% (1.0 of 4.0 MiB) at 1.0 MiB/s, ETA 3 s",
    ]);
    const tty = renderDetails([view(s)], true).split("\n")[2]!;
    expect(tty).toMatch(/^resync node-a → node-b: [█░]{30} 25\.0%/);
    expect(tty.match(/█/g)?.length).toBe(8); // a quarter of 30 cells, rounded
  });

  it("shows each node's version, and its peer's when it differs", () => {
    const repl = { state: "streaming", connected: true, peer: "node-b", lag: { entries: 0 } };
    const at = (version: string, protocolVersion: number) =>
      primary({
        version: "0.1.0",
        protocolVersion: 1,
        replication: { ...repl, peerVersion: { version, protocolVersion } },
      });
    expect(renderTable([view(at("0.1.0", 1))])).toMatch(/VERSION\s+READY\n.*\s0\.1\.0\s+yes$/);
    expect(peerVersionLine(at("0.1.0", 1))).toBeUndefined();
    expect(peerVersionLine(primary({ version: "0.1.0" }))).toBeUndefined(); // no hello yet
    expect(peerVersionLine(at("0.2.0", 1))).toBe(
      "node-a: peer node-b runs vgpud 0.2.0 (replication protocol 1), this node 0.1.0",
    );
    expect(renderDetails([view(at("0.2.0", 2))], false)).toBe(
      "node-a: peer node-b runs vgpud 0.2.0 (replication protocol 2), this node protocol 1: INCOMPATIBLE, not replicating (docs/operations.md#upgrade)",
    );
  });

  it("names both lineages when the nodes hold different histories, and only then", () => {
    const a = view(primary({ lineage: "history-x" }));
    const standby = (lineage: string | null | undefined) =>
      view(primary({ nodeId: "node-b", role: "standby", lineage }));
    expect(lineageLine([a, standby("history-x")])).toBeUndefined();
    expect(lineageLine([a, standby(null)])).toBeUndefined(); // no replica yet
    expect(lineageLine([a, standby(undefined)])).toBeUndefined(); // a build from before the field
    expect(lineageLine([a, { url: "http://b", problem: "unreachable: x", exitCode: 3 }])).toBe(
      undefined,
    );
    expect(renderDetails([a, standby("history-y")], false)).toBe(
      "LINEAGES DIFFER: node-a history-x, node-b history-y: not one history (a standby drops a replica of another history for a snapshot when it hears that primary)",
    );
  });
});
