// Starts real vgpud processes for a test file and guarantees they are gone afterwards (also
// when the test fails or the runner exits early).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type SpawnedNode, spawnVgpud } from "@vgpu-ha/daemon";

const live = new Set<SpawnedNode>();
process.on("exit", () => {
  for (const node of live) node.process.kill("SIGKILL");
});

/**
 * Spawns a vgpud that the exit guard SIGKILLs if the run ends without stopping it. The caller
 * still stops it (node.stop()); it leaves the guard's set once it has exited.
 */
export async function spawnTracked(
  options: Parameters<typeof spawnVgpud>[0],
): Promise<SpawnedNode> {
  const node = await spawnVgpud(options);
  live.add(node);
  void node.exited.then(() => live.delete(node));
  return node;
}

export const TENANTS = [
  { name: "alpha", token: "alpha-token-0001", vramQuotaBytes: "256MiB", boQuota: 1000 },
  { name: "beta", token: "beta-token-00002", vramQuotaBytes: "64MiB", boQuota: 8 },
];

export async function startNode(config: Record<string, unknown> = {}): Promise<{
  node: SpawnedNode;
  dir: string;
  cleanup: () => Promise<void>;
}> {
  const dir = mkdtempSync(join(tmpdir(), "vgpu-test-"));
  const node = await spawnVgpud({
    dir,
    name: "node-a",
    config: {
      nodeId: "node-a",
      guest: { listen: "127.0.0.1:0" },
      ops: { listen: "127.0.0.1:0" },
      device: { seed: 7, vramBytes: "512MiB" },
      tenants: TENANTS,
      log: { level: "debug" },
      ...config,
    },
  });
  live.add(node);
  return {
    node,
    dir,
    cleanup: async () => {
      await node.stop();
      live.delete(node);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
