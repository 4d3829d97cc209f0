// Proves, with real vgpud processes, that the replication hello refuses a peer of another
// replication protocol version in both directions: the standby announces protocol 2 through the
// test-only config testing.protocolVersion, the primary (this build's protocol 1) dials it, and
// each node counts vgpu_replication_refusals_total{reason="incompatible_version"} (standby
// inbound, primary outbound), logs the refusal with both versions at most once a second, shows
// the peer's version in /v1/status, and `vgpuctl status` says INCOMPATIBLE; nothing replicates.
import { readFileSync } from "node:fs";
import { REPLICATION_PROTOCOL_VERSION } from "@vgpu-ha/common";
import { afterEach, describe, expect, it } from "vitest";
import { metrics, status, waitFor } from "../support/ops-client.js";
import { ReplicationPair } from "../support/replication-pair.js";
import { vgpuctl } from "../support/vgpuctl.js";

let pair: ReplicationPair | undefined;
afterEach(async () => {
  await pair?.stop();
  pair = undefined;
});

const OTHER_PROTOCOL = REPLICATION_PROTOCOL_VERSION + 1;
const REFUSAL_LINE = "speaks another replication protocol version";

const refusals = async (node: { ops: string }, direction: string) =>
  (await metrics(node)).get("vgpu_replication_refusals_total", {
    reason: "incompatible_version",
    direction,
  });

/** The node's log lines reporting the refusal, parsed. */
function refusalLines(node: { logFile: string }): Record<string, unknown>[] {
  return readFileSync(node.logFile, "utf8")
    .split("\n")
    .filter((l) => l.includes(REFUSAL_LINE))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe("a peer of another replication protocol version", () => {
  it("is refused by both nodes, counted, logged with both versions and shown in status", async () => {
    pair = await ReplicationPair.start({
      standby: { testing: { protocolVersion: OTHER_PROTOCOL } },
    });
    const { primary } = pair;
    const standby = pair.liveStandby;
    // The primary redials every 50 ms (replication.reconnectMs): many refusals, few log lines.
    await waitFor("refusals in both directions", async () => {
      const [inbound, outbound] = await Promise.all([
        refusals(standby, "inbound"),
        refusals(primary, "outbound"),
      ]);
      return inbound >= 10 && outbound >= 10;
    });
    const [p, s] = await Promise.all([status(primary), status(standby)]);
    expect(p.replication?.state).not.toBe("streaming");
    expect(s.replication?.state).toBe("empty");
    expect(p.protocolVersion).toBe(REPLICATION_PROTOCOL_VERSION);
    expect(s.protocolVersion).toBe(OTHER_PROTOCOL);
    // The hellos also carry each device's kernel contract and description (docs/gpu.md).
    expect(p.replication?.peerVersion).toEqual({
      version: s.version,
      protocolVersion: OTHER_PROTOCOL,
      kernelContract: s.kernelContractVersion,
      device: "model",
    });
    expect(s.replication?.peerVersion).toEqual({
      version: p.version,
      protocolVersion: REPLICATION_PROTOCOL_VERSION,
      kernelContract: p.kernelContractVersion,
      device: "model",
    });

    const [pLines, sLines] = [refusalLines(primary), refusalLines(standby)];
    const runSeconds = Math.max(...[p, s].map((n) => Number(n.uptimeSeconds)));
    for (const [lines, direction] of [
      [pLines, "outbound"],
      [sLines, "inbound"],
    ] as const) {
      expect(lines.length).toBeGreaterThanOrEqual(1);
      expect(lines[0]).toMatchObject({ reason: "incompatible_version", direction });
      expect(String(lines[0]!.detail)).toContain(`(replication protocol ${OTHER_PROTOCOL})`);
      expect(String(lines[0]!.detail)).toContain(
        `(replication protocol ${REPLICATION_PROTOCOL_VERSION})`,
      );
    }
    // At most one line a second per direction, though each node refused ten times or more.
    const [pCount, sCount] = await Promise.all([
      refusals(primary, "outbound"),
      refusals(standby, "inbound"),
    ]);
    expect(pLines.length).toBeLessThan(pCount);
    expect(sLines.length).toBeLessThan(sCount);
    expect(pLines.length).toBeLessThanOrEqual(Math.ceil(runSeconds) + 2);
    expect(sLines.length).toBeLessThanOrEqual(Math.ceil(runSeconds) + 2);

    const out = vgpuctl("--node", primary.ops, "--node", standby.ops, "status");
    expect(out.code, out.err).toBe(0);
    expect(out.out).toMatch(/VERSION/);
    expect(out.out).toContain(
      `node-p: peer node-s runs vgpud ${s.version} (replication protocol ${OTHER_PROTOCOL}), this node protocol ${REPLICATION_PROTOCOL_VERSION}: INCOMPATIBLE`,
    );
  });
});
