// Proves `npm start`'s live mode: after the demo, the launcher prints a one-line status per node
// (role, epoch, applied seq, lag, frames/s), both nodes' ops URLs, which answer, and an export
// line for vgpuctl naming them; a killed node is restarted on the same ops URL; Ctrl-C (SIGINT)
// stops the launcher with exit 0 and both vgpud processes with it, and keeps the logs.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "../support/ops-client.js";

const launcher = fileURLToPath(
  new URL("../../packages/daemon/dist/bin/vgpu-local.js", import.meta.url),
);

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

let child: ChildProcess | undefined;
const pids: number[] = [];
afterEach(() => {
  // only if the test failed before its own clean stop
  for (const pid of pids) if (alive(pid)) process.kill(pid, "SIGKILL");
  if (child && child.exitCode === null) child.kill("SIGKILL");
  child = undefined;
  pids.length = 0;
});

describe("npm start (vgpu-local, live)", () => {
  it("prints a status line per node and the ops URLs; SIGINT stops everything", async () => {
    const c = spawn(process.execPath, [launcher], { stdio: ["ignore", "pipe", "pipe"] });
    child = c;
    let out = "";
    c.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d;
    });
    const exited = new Promise<number | null>((resolve) => c.once("exit", (code) => resolve(code)));

    const header = await waitFor(
      "both nodes' pids and ops URLs",
      () => {
        const a = /^node-a \(primary\) pid (\d+) .* ops (http:\/\/\S+)\/v1\/status/m.exec(out);
        const b = /^node-b \(standby\) pid (\d+) .* ops (http:\/\/\S+)\/v1\/status/m.exec(out);
        return a && b ? { a, b } : undefined;
      },
      { timeoutMs: 30_000 },
    );
    pids.push(Number(header.a[1]), Number(header.b[1]));
    for (const m of [header.a, header.b]) {
      const res = await fetch(`${m[2]}/v1/status`);
      expect(res.status).toBe(200);
    }
    expect(out).toContain(`export VGPUCTL_NODES=${header.a[2]},${header.b[2]} VGPUCTL_TOKEN=`);

    const lines = await waitFor(
      "a status line of each node",
      () => {
        const a = /^node-a {2}role=primary epoch=1 .*applied=(\d+) lag=(\d+) frames\/s=(\d+)/m.exec(
          out,
        );
        const b = /^node-b {2}role=standby epoch=1 .*applied=(\d+) lag=(\d+)/m.exec(out);
        return a && b ? { a, b } : undefined;
      },
      { timeoutMs: 45_000 },
    );
    expect(Number(lines.b[1])).toBeGreaterThan(0); // the standby applied the demo's entries
    expect(Number(lines.a[3])).toBeGreaterThan(0); // the light load runs

    // The standby dies; the launcher restarts it on the same ports (the exported URLs still work).
    process.kill(Number(header.b[1]), "SIGKILL");
    const restarted = await waitFor(
      "node-b restarted",
      () =>
        /^node-b restarted: pid (\d+) {2}ops (http:\/\/\S+)\/v1\/status/m.exec(out) ?? undefined,
      { timeoutMs: 30_000 },
    );
    pids.push(Number(restarted[1]));
    expect(restarted[2]).toBe(header.b[2]);
    expect((await fetch(`${header.b[2]}/v1/status`)).status).toBe(200);

    c.kill("SIGINT");
    expect(await exited).toBe(0);
    await waitFor("both vgpud processes gone", () => pids.every((pid) => !alive(pid)), {
      timeoutMs: 10_000,
    });
    const kept = /logs kept in (\S+): (.*)$/m.exec(out);
    expect(kept, out.slice(-500)).not.toBeNull();
    const [, dir, files] = kept!;
    for (const f of files!.split(", ")) expect(existsSync(join(dir!, f)), f).toBe(true);
    expect(files).toMatch(/node-a\.\d+\.log/);
    rmSync(dir!, { recursive: true, force: true });
  });
});
