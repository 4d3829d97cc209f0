// `vgpuctl promote` (or `promote --force`) against a pair, as an operator would type it: runs
// the real vgpuctl with the nodes' ops URLs and the admin token, and records its exit code and
// what it printed (11: refused, PRIMARY_LEASED; see vgpuctl's exit codes).
import { execFile } from "node:child_process";
import type { AttackOutcome } from "./outcome.js";
import { VGPUCTL } from "./paths.js";

export interface PromoteSpec {
  /** The nodes' ops URLs (http://host:port). */
  readonly nodes: readonly string[];
  readonly token: string;
  readonly force: boolean;
}

export function promote(spec: PromoteSpec): Promise<AttackOutcome & { exitCode: number }> {
  const args = [VGPUCTL, "--json", "--token", spec.token];
  for (const n of spec.nodes) args.push("--node", n);
  args.push("promote", ...(spec.force ? ["--force"] : []));
  return new Promise((resolve) => {
    execFile(process.execPath, args, { timeout: 30_000 }, (err, stdout, stderr) => {
      const exitCode = err ? (typeof err.code === "number" ? err.code : 5) : 0;
      const said = `${stdout}${stderr}`.trim().replace(/\s+/g, " ").slice(0, 300);
      resolve({
        exitCode,
        sent: { "vgpuctl promote": 1 },
        answers: { [`exit ${exitCode}`]: 1 },
        note: `vgpuctl promote${spec.force ? " --force" : ""}: exit ${exitCode}: ${said}`,
      });
    });
  });
}
