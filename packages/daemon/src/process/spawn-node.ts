// Starts a real vgpud process with a config written to a file, and learns its addresses from
// its "node serving" log line. Used by the local launcher, the integration tests and the
// benchmarks; every caller must stop() what it started.
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

export const VGPUD_BIN = fileURLToPath(new URL("../bin/vgpud.js", import.meta.url));

/**
 * How long a node may take to say "node serving" before it is given up. Readiness is that log
 * line, and a node that exits before it is reported at once, so the bound only ends a node that
 * hangs: it is generous, because a loaded machine starts node slowly (15 s made integration
 * tests flake on a 2-core box shared by several test runs), and below the tests' 60 s timeout,
 * so a hung start fails with this message and the log's path.
 */
export const START_TIMEOUT_MS = 45_000;

export interface SpawnedNode {
  readonly process: ChildProcess;
  readonly pid: number;
  /** host:port of the guest API. */
  readonly guest: string;
  /** Base URL of the ops HTTP server. */
  readonly ops: string;
  /** host:port of the replication server (a standby). */
  readonly replication: string | undefined;
  readonly logFile: string;
  /** Resolves with the exit code (or the signal name) when the process ends. */
  readonly exited: Promise<number | string>;
  /** SIGTERM, then SIGKILL after graceMs; resolves when the process is gone. */
  stop(graceMs?: number): Promise<number | string>;
}

export async function spawnVgpud(options: {
  /** The config object (see packages/common/src/config/schema.ts); written as JSON. */
  config: Record<string, unknown>;
  /** Directory for the config file and the node's log. */
  dir: string;
  name?: string;
  /** Default START_TIMEOUT_MS. */
  startTimeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  /**
   * A command put before `node vgpud.js …`, e.g. ["ip", "netns", "exec", "ns-a"] to run the
   * node in a network namespace. It must exec node in its own process, so that `pid` (and the
   * signals sent to it) are the node's.
   */
  wrap?: readonly string[];
}): Promise<SpawnedNode> {
  const name = options.name ?? String(options.config.nodeId ?? "node");
  mkdirSync(options.dir, { recursive: true });
  const configFile = join(options.dir, `${name}.json`);
  const logFile = join(options.dir, `${name}.log`);
  // Each node its own state directory (the epoch file) unless the caller names one.
  const config = { stateDir: join(options.dir, `${name}-state`), ...options.config };
  writeFileSync(configFile, JSON.stringify(config, null, 2));
  const argv = [process.execPath, VGPUD_BIN, "--config", configFile];
  const command = [...(options.wrap ?? []), ...argv];
  const child = spawn(command[0]!, command.slice(1), {
    stdio: ["ignore", "pipe", "pipe"],
    env: options.env ?? process.env,
  });
  const log = createWriteStream(logFile);
  child.stderr.pipe(log, { end: false });
  const exited = new Promise<number | string>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")),
  );
  const startTimeoutMs = options.startTimeoutMs ?? START_TIMEOUT_MS;
  const addresses = await new Promise<{
    guest: string;
    ops: string;
    replication: string | undefined;
  }>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name}: not serving after ${startTimeoutMs} ms (log: ${logFile})`)),
      startTimeoutMs,
    );
    const lines = createInterface({ input: child.stdout });
    lines.on("line", (line) => {
      log.write(`${line}\n`);
      try {
        const entry = JSON.parse(line) as {
          msg?: string;
          guest?: string;
          ops?: string;
          replication?: string;
        };
        if (entry.msg === "node serving" && entry.guest && entry.ops) {
          clearTimeout(timer);
          resolve({ guest: entry.guest, ops: entry.ops, replication: entry.replication });
        }
      } catch {
        // not a log line of ours
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${name}: exited (${code}) before serving (log: ${logFile})`));
    });
  }).catch((e: unknown) => {
    child.kill("SIGKILL");
    throw e;
  });
  const stop = async (graceMs = 5000) => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    }
    return exited;
  };
  return { process: child, pid: child.pid!, ...addresses, logFile, exited, stop };
}
