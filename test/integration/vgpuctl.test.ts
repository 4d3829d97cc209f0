// Proves the vgpuctl CLI against a real pair: run as a child process (the built bin), it shows
// both nodes, verifies, switches over with progress, and its exit codes say what went wrong
// (refused token 4, unreachable node 3, usage 2).
import { spawn, spawnSync } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { ADMIN, FailoverPair } from "../support/failover-pair.js";
import { status, waitFor } from "../support/ops-client.js";

const BIN = "packages/client/dist/vgpuctl/main.js";

let pair: FailoverPair | undefined;
afterEach(async () => {
  await pair?.cleanup();
  pair = undefined;
});

/** Runs vgpuctl with a clean environment (no VGPUCTL_* or VGPU_* from the caller). */
function vgpuctl(...args: string[]) {
  const env = { ...process.env };
  for (const name of ["VGPUCTL_NODES", "VGPUCTL_TOKEN", "VGPU_NODES", "VGPU_TOKEN"]) {
    delete env[name];
  }
  const r = spawnSync(process.execPath, [BIN, ...args], {
    encoding: "utf8",
    timeout: 30_000,
    env,
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** Starts `vgpuctl watch`, waits for two redraws, sends SIGINT: its exit code and output. */
function watchTwice(...args: string[]): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [BIN, ...args, "watch", "--interval", "100"]);
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
    if (out.split("\x1b[2J").length > 2) child.kill("SIGINT");
  });
  return new Promise((resolve) => child.on("exit", (code) => resolve({ code, out })));
}

async function streamingPair(): Promise<FailoverPair> {
  const p = await FailoverPair.create();
  await waitFor(
    "a streaming to its standby",
    async () => (await status(p.node("a"))).replication?.state === "streaming",
    { timeoutMs: 20_000 },
  );
  return p;
}

describe("vgpuctl", () => {
  it("status, verify, a refused token and a switchover against a running pair", async () => {
    pair = await streamingPair();
    const nodes = ["--node", pair.node("a").ops, "--node", pair.node("b").ops];

    const json = vgpuctl(...nodes, "status", "--json");
    expect(json.code, json.err).toBe(0);
    const listed = JSON.parse(json.out) as { status: { nodeId: string; role: string } }[];
    expect(listed.map((n) => [n.status.nodeId, n.status.role])).toEqual([
      ["a", "primary"],
      ["b", "standby"],
    ]);

    const table = vgpuctl(...nodes, "status");
    expect(table.code, table.err).toBe(0);
    expect(table.out).toMatch(/^a\s.*primary/m);
    expect(table.out).toMatch(/^b\s.*standby/m);

    const watched = await watchTwice(...nodes);
    expect(watched.code).toBe(0);
    expect(watched.out).toMatch(/^b\s.*standby/m);

    const ok = vgpuctl(...nodes, "--token", ADMIN, "verify");
    expect(ok.code, ok.err).toBe(0);
    expect(ok.out).toContain("verify: equal");

    const wrong = vgpuctl(...nodes, "--token", "wrong", "verify");
    expect(wrong.code).toBe(4);
    expect(wrong.err).toContain("401");

    const sw = vgpuctl(...nodes, "--token", ADMIN, "switchover");
    expect(sw.code, sw.out + sw.err).toBe(0);
    expect(sw.out).toContain("switchover: handing over from a");
    expect(sw.out).toMatch(/switchover: b .*is primary at epoch 2/);
    expect(sw.out).toMatch(/guests paused \d+ ms/);
    const after = JSON.parse(vgpuctl(...nodes, "status", "--json").out) as {
      status: { role: string };
    }[];
    expect(after.map((n) => n.status.role)).toEqual(["standby", "primary"]);
  });

  it("a dead node: says unreachable and exits 3; an unknown command exits 2", () => {
    const dead = vgpuctl("status", "--node", "http://127.0.0.1:1");
    expect(dead.code).toBe(3);
    expect(dead.out).toContain("unreachable");

    const action = vgpuctl("--node", "http://127.0.0.1:1", "--token", "t", "verify");
    expect(action.code).toBe(3);
    expect(action.err).toContain("unreachable");

    const unknown = vgpuctl("frobnicate");
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain("unknown command");
  });
});
