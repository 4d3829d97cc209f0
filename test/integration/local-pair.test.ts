// Proves `npm start`'s launcher works as the README says: it starts a local primary + standby
// pair, the demo guest's results all check out, the replicas are equal, and it cleans up.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const launcher = fileURLToPath(
  new URL("../../packages/daemon/dist/bin/vgpu-local.js", import.meta.url),
);

describe("npm start (vgpu-local --once)", () => {
  it("runs the demo on a replicated pair and exits 0", () => {
    const run = spawnSync(process.execPath, [launcher, "--once"], {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(run.stderr).toBe("");
    expect(run.stdout).toContain("node-a (primary)");
    expect(run.stdout).toContain("node-b (standby)");
    expect(run.stdout).toMatch(/✓ replicas equal/);
    expect(run.stdout).not.toContain("✗");
    expect(run.status).toBe(0);
  });
});
