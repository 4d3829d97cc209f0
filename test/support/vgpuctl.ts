// Runs the built vgpuctl as a child process, as an operator would, with a clean environment
// (no VGPUCTL_* or VGPU_* from the caller): its exit code, stdout and stderr.
import { spawnSync } from "node:child_process";

export const VGPUCTL_BIN = "packages/client/dist/vgpuctl/main.js";

export function vgpuctl(...args: string[]): { code: number | null; out: string; err: string } {
  const env = { ...process.env };
  for (const name of ["VGPUCTL_NODES", "VGPUCTL_TOKEN", "VGPU_NODES", "VGPU_TOKEN"]) {
    delete env[name];
  }
  const r = spawnSync(process.execPath, [VGPUCTL_BIN, ...args], {
    encoding: "utf8",
    timeout: 30_000,
    env,
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}
