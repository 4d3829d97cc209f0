// A real vgpud for benchmarks, started through the product's spawnVgpud (one way to start a
// node) on loopback ports chosen by the kernel (port 0), with its RSS and CPU time read from
// /proc. The child is killed when the benchmark ends, fails, or the process exits.
//
// spawnVgpud takes no node flags, only an environment, so node options reach the child through
// NODE_OPTIONS: `BENCH_NODE_ARGS` adds options to every node (only those NODE_OPTIONS allows;
// Node 20 refuses --cpu-prof there). CPU profiles: see cpu-profile.ts (BENCH_PROFILE_DIR).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { type SpawnedNode, spawnVgpud } from "@vgpu-ha/daemon";
import { profileEnv } from "./cpu-profile.js";
import { pinNode } from "./pinning.js";

/** Long enough for a node writing a CPU profile at exit. */
const STOP_GRACE_MS = 20_000;

export interface NodeProcess {
  readonly pid: number;
  /** Names its files and its CPU profile directory. */
  readonly label: string;
  /** host:port of the guest API. */
  readonly guest: string;
  /** Base URL of the ops HTTP server. */
  readonly ops: string;
  /** host:port of the replication server (a standby). */
  readonly replication: string | undefined;
  readonly logFile: string;
  /** Resident set size now, from /proc/<pid>/status VmRSS. */
  rssMiB(): number;
  /** User plus system CPU time so far. */
  cpuSeconds(): number;
  /** User plus system CPU time so far of each live thread, by thread id (the main thread's is the pid). */
  threadCpuSeconds(): Map<number, number>;
  /** The node's JSON log lines written so far. */
  logLines(): Record<string, unknown>[];
  /** SIGTERM, then SIGKILL after a grace period; removes the temporary directory. */
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Names the node's files and its profile directory (BENCH_PROFILE_DIR/<label>); nodeId by default. */
  readonly label?: string;
  /** With BENCH_PROFILE_DIR: profile from the start until the first collectProfiles(). */
  readonly profileFromStart?: boolean;
  /** Another build's spawnVgpud (before-build.ts): runs that build's vgpud; this one's by default. */
  readonly spawn?: typeof spawnVgpud;
}

/**
 * Starts vgpud with `config`: guest and ops listen on any free loopback port, replication too
 * unless `config.replication.listen` says otherwise; stateDir is a temporary directory; log
 * level is info, since spawnVgpud learns the addresses from the "node serving" info line (at
 * warn it would time out; the node logs nothing per frame at info).
 */
export async function startNode(
  config: Record<string, unknown>,
  options: StartOptions = {},
): Promise<NodeProcess> {
  const label = options.label ?? String(config.nodeId ?? "node");
  const pinned = pinNode(label); // BENCH_PIN_CORES (pinning.ts); throws before anything exists
  const dir = mkdtempSync(path.join(os.tmpdir(), "vgpu-bench-"));
  const full = {
    ...config,
    stateDir: path.join(dir, "state"),
    guest: { ...(config.guest as object), listen: "127.0.0.1:0" },
    ops: { ...(config.ops as object), listen: "127.0.0.1:0" },
    // Every role serves replication (any node may become a standby); any port unless given.
    replication: { listen: "127.0.0.1:0", ...(config.replication as object) },
    log: { level: "info" },
  };
  // BENCH_KEEP_LOGS=1 keeps each node's directory (config, log) for a look afterwards.
  const removeDir = () => {
    if (process.env.BENCH_KEEP_LOGS !== "1") rmSync(dir, { recursive: true, force: true });
  };
  let spawned: SpawnedNode;
  try {
    spawned = await (options.spawn ?? spawnVgpud)({
      config: full,
      dir,
      name: label,
      env: childEnv(label, options.profileFromStart ?? false),
      ...(pinned === undefined ? {} : { wrap: pinned.wrap }),
    });
  } catch (e) {
    pinned?.release();
    const tail = logTail(path.join(dir, `${label}.log`));
    removeDir();
    throw new Error(`${(e as Error).message}\n--- end of its log ---\n${tail}`);
  }
  const killAtExit = () => spawned.process.kill("SIGKILL");
  process.on("exit", killAtExit);
  return handle(spawned, label, async () => {
    await spawned.stop(STOP_GRACE_MS);
    pinned?.release();
    process.off("exit", killAtExit);
    removeDir();
  });
}

function childEnv(label: string, profileFromStart: boolean): NodeJS.ProcessEnv {
  const profile = profileEnv(label, profileFromStart);
  const nodeOptions = [
    process.env.NODE_OPTIONS ?? "",
    process.env.BENCH_NODE_ARGS ?? "",
    ...profile.nodeOptions,
  ]
    .filter((o) => o.trim() !== "")
    .join(" ");
  return {
    ...process.env,
    ...profile.env,
    ...(nodeOptions === "" ? {} : { NODE_OPTIONS: nodeOptions }),
  };
}

function handle(spawned: SpawnedNode, label: string, stop: () => Promise<void>): NodeProcess {
  const { pid, guest, ops, replication, logFile } = spawned;
  return {
    pid,
    label,
    guest,
    ops,
    replication,
    logFile,
    rssMiB: () => rssMiB(pid),
    cpuSeconds: () => cpuSeconds(pid),
    threadCpuSeconds: () => threadCpuSeconds(pid),
    logLines: () => readLogLines(logFile),
    stop,
  };
}

function logTail(file: string, lines = 20): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

function readLogLines(file: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of readFileSync(file, "utf8").split("\n")) {
    try {
      const value: unknown = JSON.parse(line);
      if (typeof value === "object" && value !== null) out.push(value as Record<string, unknown>);
    } catch {
      // not a log line (stderr of the child, a node warning): ignored
    }
  }
  return out;
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  if (match === null) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(match[1]) / 1024;
}

let ticksPerSecond: number | undefined;

function cpuSeconds(pid: number): number {
  return readThreadStat(`/proc/${pid}/stat`).cpuSeconds;
}

/** One thread's CPU seconds (user + system) and minor page faults, from its stat file. */
export interface ThreadStat {
  readonly cpuSeconds: number;
  readonly minorFaults: number;
}

function readThreadStat(file: string): ThreadStat {
  ticksPerSecond ??= clockTicks();
  const stat = readFileSync(file, "utf8");
  // Fields after the command name: state is field 3, minflt 10, utime 14 and stime 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return {
    cpuSeconds: (Number(fields[11]) + Number(fields[12])) / ticksPerSecond,
    minorFaults: Number(fields[7]),
  };
}

/** Each live thread of process `pid` (by thread id): its CPU time and minor faults so far. */
export function threadStats(pid: number): Map<number, ThreadStat> {
  const out = new Map<number, ThreadStat>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      out.set(Number(tid), readThreadStat(`/proc/${pid}/task/${tid}/stat`));
    } catch {
      // the thread ended between the listing and the read: it has no time left to count
    }
  }
  return out;
}

function threadCpuSeconds(pid: number): Map<number, number> {
  return new Map([...threadStats(pid)].map(([tid, s]) => [tid, s.cpuSeconds]));
}

/** Busy CPU time of the whole machine so far, all cores (from /proc/stat). */
export function machineCpuSeconds(): number {
  ticksPerSecond ??= clockTicks();
  const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!;
  // cpu user nice system idle iowait irq softirq steal …
  const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const idle = ticks[3]! + ticks[4]!;
  return (ticks.reduce((a, b) => a + b, 0) - idle) / ticksPerSecond;
}

function clockTicks(): number {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
}
