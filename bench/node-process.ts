// A real vgpud for benchmarks: started as a child process on loopback ports chosen by the
// kernel (port 0), learnt from its "node serving" log line; its RSS and CPU time read from
// /proc. The child is killed when the benchmark ends, fails, or the process exits.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const VGPUD = fileURLToPath(new URL("../../packages/daemon/dist/bin/vgpud.js", import.meta.url));
const START_TIMEOUT_MS = 15_000;
const STOP_TIMEOUT_MS = 5_000;

export interface NodeProcess {
  readonly pid: number;
  /** host:port of the guest API. */
  readonly guest: string;
  /** Resident set size now, from /proc/<pid>/status VmRSS. */
  rssMiB(): number;
  /** User plus system CPU time so far. */
  cpuSeconds(): number;
  /** SIGTERM, then SIGKILL after a grace period; removes the temporary directory. */
  stop(): Promise<void>;
}

/**
 * Starts vgpud with `config` (guest and ops listeners and stateDir are filled in).
 * `BENCH_NODE_ARGS` adds node options to the child, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
 */
export async function startNode(config: Record<string, unknown>): Promise<NodeProcess> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "vgpu-bench-"));
  const configPath = path.join(dir, "config.json");
  const full = {
    ...config,
    stateDir: path.join(dir, "state"),
    guest: { ...(config.guest as object), listen: "127.0.0.1:0" },
    ops: { listen: "127.0.0.1:0" },
    log: { level: "info" },
  };
  writeFileSync(configPath, JSON.stringify(full, null, 2));
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? "").split(/\s+/).filter((a) => a !== "");
  const child = spawn(process.execPath, [...nodeArgs, VGPUD, "--config", configPath], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const killAtExit = () => child.kill("SIGKILL");
  process.on("exit", killAtExit);
  const cleanup = () => {
    process.off("exit", killAtExit);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const guest = await servingAddress(child);
    return handle(child, guest, cleanup);
  } catch (e) {
    await stopChild(child);
    cleanup();
    throw e;
  }
}

function handle(child: ChildProcess, guest: string, cleanup: () => void): NodeProcess {
  const pid = child.pid!;
  return {
    pid,
    guest,
    rssMiB: () => rssMiB(pid),
    cpuSeconds: () => cpuSeconds(pid),
    stop: async () => {
      await stopChild(child);
      cleanup();
    },
  };
}

/** Waits for the "node serving" line; rejects if the child exits or takes too long. */
function servingAddress(child: ChildProcess): Promise<string> {
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const lines = createInterface({ input: child.stdout! });
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`vgpud did not start in ${START_TIMEOUT_MS} ms: ${stderr}`)),
      START_TIMEOUT_MS,
    );
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`vgpud exited with ${code} before serving: ${stderr}`));
    });
    lines.on("line", (line) => {
      const entry = parseLogLine(line);
      if (entry?.msg !== "node serving" || typeof entry.guest !== "string") return;
      clearTimeout(timer);
      resolve(entry.guest);
    });
  });
}

function parseLogLine(line: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === "object" && value !== null
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined; // not a log line (e.g. a node warning); ignored
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  if (match === null) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(match[1]) / 1024;
}

let ticksPerSecond: number | undefined;

function cpuSeconds(pid: number): number {
  ticksPerSecond ??= clockTicks();
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name: state is field 3, utime 14 and stime 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

function clockTicks(): number {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
}
