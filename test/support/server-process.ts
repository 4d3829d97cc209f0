// An external server process for tests (etcd, Prometheus): spawned with its own temporary
// directory, killed by an exit guard if the run ends without stopping it, ready once an HTTP
// URL answers. stop() ends it (SIGCONT first, in case a test paused it) and removes the dir.
import { type ChildProcess, spawn } from "node:child_process";
import { rmSync } from "node:fs";

const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const p of live) p.kill("SIGKILL");
});

export interface ServerProcess {
  readonly process: ChildProcess;
  stop(): Promise<void>;
}

export async function startServerProcess(options: {
  /** For messages: "etcd", "prometheus". */
  readonly name: string;
  readonly binary: string;
  readonly args: readonly string[];
  /** Removed by stop(). */
  readonly dir: string;
  /** Ready once a GET of it answers 2xx. */
  readonly readyUrl: string;
  readonly readyTimeoutMs: number;
  /** How stop() ends it: SIGKILL at once, or this signal and SIGKILL after `graceMs`. */
  readonly stopSignal?: NodeJS.Signals;
  readonly graceMs?: number;
}): Promise<ServerProcess> {
  const child = spawn(options.binary, options.args, { stdio: ["ignore", "ignore", "pipe"] });
  live.add(child);
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGCONT");
      child.kill(options.stopSignal ?? "SIGKILL");
      const timer = setTimeout(() => child.kill("SIGKILL"), options.graceMs ?? 5000);
      await exited;
      clearTimeout(timer);
    }
    live.delete(child);
    rmSync(options.dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + options.readyTimeoutMs;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`${options.name} exited with ${child.exitCode}: ${stderr}`);
    }
    try {
      if ((await fetch(options.readyUrl)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${options.name} did not become ready: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { process: child, stop };
}
