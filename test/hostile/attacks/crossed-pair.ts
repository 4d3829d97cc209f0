// A second pair on the same network whose configs were copied from the attacked pair's and
// whose peer.replicationAddress still names the attacked pair's nodes (the copy-paste of
// issue 12): its nodes have the same names, another cluster id, and dial the attacked nodes'
// replication ports. Started on loopback for `durationMs`, then stopped and removed.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pairConfigs, type SpawnedNode, spawnVgpud } from "@vgpu-ha/daemon";
import { type AttackOutcome, sleep, Tally } from "./outcome.js";

export interface CrossedPairSpec {
  /** The attacked pair's replication addresses: [its first node's, its second node's]. */
  readonly targets: readonly [string, string];
  /** The attacked pair's node ids, reused by the copy. */
  readonly names: readonly [string, string];
  readonly clusterId: string;
  readonly durationMs: number;
}

export async function crossedPair(spec: CrossedPairSpec): Promise<AttackOutcome> {
  const dir = mkdtempSync(join(tmpdir(), "vgpu-crossed-"));
  const [a, b] = await pairConfigs({
    names: [spec.names[0], spec.names[1]],
    dir,
    clusterId: `${spec.clusterId}-copy`,
    seeds: [5, 6],
    common: { device: { vramBytes: "64MiB" }, log: { level: "info" } },
  });
  // Copy-pasted: each node's peer is the attacked pair's other node.
  (a.peer as Record<string, unknown>).replicationAddress = spec.targets[1];
  (b.peer as Record<string, unknown>).replicationAddress = spec.targets[0];
  const nodes: SpawnedNode[] = [];
  const kill = () => {
    for (const n of nodes) n.process.kill("SIGKILL");
  };
  process.once("exit", kill);
  const answers = new Tally();
  try {
    nodes.push(await spawnVgpud({ dir, name: "copy-b", config: b }));
    nodes.push(await spawnVgpud({ dir, name: "copy-a", config: a }));
    await sleep(spec.durationMs);
    for (const [i, n] of nodes.entries()) {
      const s = (await (await fetch(`${n.ops}/v1/status`)).json()) as Record<string, unknown>;
      answers.add(`copy of ${spec.names[1 - i]} ended as ${String(s.role)}@${String(s.epoch)}`);
    }
  } finally {
    await Promise.all(nodes.map((n) => n.stop(3000)));
    process.off("exit", kill);
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    sent: { "stray nodes": nodes.length },
    answers: answers.counts,
    note: `a copy of the pair (cluster ${spec.clusterId}-copy) dialling ${spec.targets.join(" and ")} for ${spec.durationMs / 1000} s`,
  };
}
