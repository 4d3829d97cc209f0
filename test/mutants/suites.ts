// What runs against each mutant, in a scratch tree: the build, then the failover simulator
// (stopped at its first failing seed), the scenario files and the replication simulator, each
// through its own command line. The first suite that fails kills the mutant; a survivor has
// passed them all. Every child process is tracked and killed if the run is interrupted.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { firstFailingSeed, type Kill } from "./mutant.js";

export interface SuiteOptions {
  /** The scratch tree (built). */
  readonly dir: string;
  readonly baseSeed: number;
  readonly seeds: number;
  readonly timeoutMs: number;
}

export interface Suite {
  readonly name: string;
  /** undefined when it passed; else where it failed. */
  run(options: SuiteOptions): Promise<Kill | undefined>;
}

const live = new Set<ChildProcess>();

/** Kills the children still running (an interrupted run). */
export function killChildren(): void {
  for (const child of live) killGroup(child);
}

/** Each child leads its own process group (npm and vitest start processes of their own). */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // already gone
  }
}

interface Finished {
  readonly code: number | null;
  readonly output: string;
  readonly timedOut: boolean;
  /** The value `stopWhen` returned when it stopped the child early. */
  readonly stopped?: string;
}

/** Output kept of a command: its end, where errors and summaries are. */
const OUTPUT_KEPT_CHARS = 64 * 1024;

/**
 * Runs a command to its end, or until `stopWhen` finds what it looks for in the output so far
 * (the child is then killed), or until the timeout.
 */
export function runCommand(
  command: string,
  args: readonly string[],
  cwd: string,
  timeoutMs: number,
  stopWhen?: (output: string) => string | undefined,
): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    live.add(child);
    let output = "";
    let stopped: string | undefined;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, timeoutMs);
    const take = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-OUTPUT_KEPT_CHARS);
      if (stopped === undefined && stopWhen) {
        stopped = stopWhen(output);
        if (stopped !== undefined) killGroup(child);
      }
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.on("error", (e) => {
      clearTimeout(timer);
      live.delete(child);
      reject(e);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      live.delete(child);
      resolve({ code, output, timedOut, ...(stopped === undefined ? {} : { stopped }) });
    });
  });
}

/** The first line worth showing of a failure's output. */
function firstLine(output: string, pattern: RegExp): string {
  const lines = output.split("\n").map((l) => l.trim());
  return (lines.find((l) => pattern.test(l)) ?? lines.find((l) => l.length > 0) ?? "").slice(
    0,
    160,
  );
}

/** `npm run build` in the tree: undefined when it built, else the first compiler error. */
export async function build(dir: string, timeoutMs: number): Promise<string | undefined> {
  const done = await runCommand("npm", ["run", "build", "--silent"], dir, timeoutMs);
  if (done.code === 0) return undefined;
  return done.timedOut ? "the build timed out" : firstLine(done.output, /error/i);
}

/** One of the two simulators through test/sim/run.ts, stopped at its first failing seed. */
function simulator(name: string, failover: boolean): Suite {
  return {
    name,
    async run({ dir, baseSeed, seeds, timeoutMs }) {
      const args = ["test/dist/sim/run.js", "--seeds", String(seeds), "--seed", String(baseSeed)];
      if (failover) args.push("--failover");
      const done = await runCommand("node", args, dir, timeoutMs, (output) => {
        const seed = firstFailingSeed(output);
        return seed === undefined ? undefined : `seed ${seed}`;
      });
      if (done.stopped !== undefined) return { suite: name, where: done.stopped };
      if (done.timedOut) return { suite: name, where: `no end within ${timeoutMs / 1000} s` };
      if (done.code === 0) return undefined;
      const seed = firstFailingSeed(done.output);
      return {
        suite: name,
        where: seed !== undefined ? `seed ${seed}` : firstLine(done.output, /error/i),
      };
    },
  };
}

interface VitestReport {
  readonly testResults: readonly {
    readonly assertionResults: readonly { readonly title: string; readonly status: string }[];
  }[];
}

/** The scenario files (test/scenarios/*.yaml) through vitest, stopped at the first failure. */
const scenarios: Suite = {
  name: "scenarios",
  async run({ dir, timeoutMs }) {
    const report = join(dir, "mutants-scenarios.json");
    rmSync(report, { force: true });
    const done = await runCommand(
      "node",
      [
        "node_modules/vitest/vitest.mjs",
        "run",
        "--project",
        "unit",
        "test/scenarios",
        "--bail",
        "1",
        "--reporter=json",
        `--outputFile=${report}`,
      ],
      dir,
      timeoutMs,
    );
    if (done.timedOut) return { suite: "scenarios", where: `no end within ${timeoutMs / 1000} s` };
    if (done.code === 0) return undefined;
    if (existsSync(report)) {
      const parsed = JSON.parse(readFileSync(report, "utf8")) as VitestReport;
      const failed = parsed.testResults
        .flatMap((file) => file.assertionResults)
        .filter((t) => t.status === "failed")
        .map((t) => t.title);
      if (failed.length > 0) return { suite: "scenarios", where: failed.join(", ") };
    }
    return { suite: "scenarios", where: firstLine(done.output, /error|fail/i) };
  },
};

/** In the order they run: the failover simulator finds most bugs in a few seconds. */
export const SUITES: readonly Suite[] = [
  simulator("failover-sim", true),
  scenarios,
  simulator("replication-sim", false),
];
