// A hostile tenant (test/support/hostile-guest.ts, its own process at the lowest priority):
// for `durationMs` it floods its session with frames the node must refuse (allocations over
// quota, oversize DMAs, launches above the work limit) and storms the node with session
// opens; then it pauses until all it sent is answered, closes, and reports the codes it got.
import { spawn } from "node:child_process";
import { setPriority } from "node:os";
import { createInterface } from "node:readline";
import { type AttackOutcome, sleep } from "./outcome.js";
import { HOSTILE_GUEST } from "./paths.js";

export interface HostileTenantSpec {
  readonly target: string;
  readonly tenant: string;
  readonly token: string;
  readonly durationMs: number;
}

export async function hostileTenant(spec: HostileTenantSpec): Promise<AttackOutcome> {
  const child = spawn(
    process.execPath,
    [HOSTILE_GUEST, spec.target, spec.tenant, spec.token, "both"],
    {
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  const kill = () => child.kill("SIGKILL");
  process.once("exit", kill);
  try {
    // Its CPU is not the node's to defend (on a real pair it runs on another host).
    setPriority(child.pid!, 19);
    const lines = createInterface({ input: child.stdout! });
    const waiting = new Map<string, () => void>();
    let report: ((r: Record<string, number>) => void) | undefined;
    const reported = new Promise<Record<string, number>>((resolve, reject) => {
      report = resolve;
      child.once("exit", (code) =>
        reject(new Error(`hostile guest exited (${code}) without a report`)),
      );
    });
    reported.catch(() => undefined);
    lines.on("line", (line) => {
      const w = waiting.get(line);
      if (w) {
        waiting.delete(line);
        w();
      } else report?.(JSON.parse(line) as Record<string, number>);
    });
    const next = (line: string) =>
      Promise.race([
        new Promise<void>((r) => waiting.set(line, r)),
        reported.then(() => undefined),
      ]);
    await next("ready");
    child.stdin!.write("go\n");
    await sleep(spec.durationMs);
    const idle = next("idle");
    child.stdin!.write("pause\n");
    await idle;
    child.stdin!.end();
    const answers = await reported;
    return {
      sent: { "seconds of flood": spec.durationMs / 1000 },
      answers,
      note: `a hostile tenant flooded refused frames and session opens for ${spec.durationMs / 1000} s`,
    };
  } finally {
    kill();
    process.off("exit", kill);
  }
}
