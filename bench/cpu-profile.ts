// CPU profiles of benchmarked nodes, one per measured phase, and their summary by self time.
// Off unless BENCH_PROFILE_DIR is set; then every node started with a label loads
// cpu-profile-preload.js (see there why not --cpu-prof) and profilePhase() brackets a phase
// with SIGUSR2, leaving DIR/<label>/<phase>.cpuprofile.
//   node bench/dist/cpu-profile.js FILE.cpuprofile…   prints their summed summary
import { existsSync, readFileSync, renameSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { sleepMs } from "./timing.js";

const PRELOAD = fileURLToPath(new URL("./cpu-profile-preload.js", import.meta.url));
const WRITE_TIMEOUT_MS = 30_000;

/** Where profiles go, or undefined when profiling is off. */
export function profileRoot(): string | undefined {
  const dir = process.env.BENCH_PROFILE_DIR;
  return dir === undefined || dir === "" ? undefined : path.resolve(dir);
}

/**
 * NODE_OPTIONS and environment additions for a node labelled `label` (none when off);
 * `fromStart`: its profiler runs from the start until the first collectProfiles().
 */
export function profileEnv(
  label: string,
  fromStart = false,
): { nodeOptions: string[]; env: Record<string, string> } {
  const root = profileRoot();
  if (root === undefined) return { nodeOptions: [], env: {} };
  return {
    nodeOptions: [`--import=${pathToFileURL(PRELOAD).href}`],
    env: {
      BENCH_CPU_PROF_DIR: path.join(root, label),
      ...(fromStart ? { BENCH_CPU_PROF_FROM_START: "1" } : {}),
    },
  };
}

export interface Profiled {
  readonly pid: number;
  readonly label: string;
}

/** Profiles written so far per node process (its preload numbers them 1, 2, …). */
const written = new Map<number, number>();

/** Starts the profilers of `nodes` (nothing when profiling is off). */
export function startProfiles(nodes: readonly Profiled[]): void {
  if (profileRoot() === undefined) return;
  for (const n of nodes) process.kill(n.pid, "SIGUSR2");
}

/**
 * Stops the profilers of `nodes` and waits for their profiles, renamed
 * DIR/<label>/<phase>.cpuprofile; their paths (none when profiling is off).
 */
export async function collectProfiles(
  nodes: readonly Profiled[],
  phase: string,
): Promise<string[]> {
  const root = profileRoot();
  if (root === undefined) return [];
  for (const n of nodes) process.kill(n.pid, "SIGUSR2");
  const profiles: string[] = [];
  for (const n of nodes) {
    const dir = path.join(root, n.label);
    const seq = (written.get(n.pid) ?? 0) + 1;
    written.set(n.pid, seq);
    const file = path.join(dir, `${seq}.cpuprofile`);
    const deadline = Date.now() + WRITE_TIMEOUT_MS;
    while (!existsSync(file)) {
      if (Date.now() > deadline) throw new Error(`${n.label}: no profile ${file}`);
      await sleepMs(50);
    }
    const named = path.join(dir, `${phase}.cpuprofile`);
    renameSync(file, named);
    profiles.push(named);
  }
  return profiles;
}

/** Runs `body` with the profilers of `nodes` on; see collectProfiles. */
export async function profilePhase<T>(
  nodes: readonly Profiled[],
  phase: string,
  body: () => Promise<T>,
): Promise<{ result: T; profiles: string[] }> {
  startProfiles(nodes);
  const result = await body();
  return { result, profiles: await collectProfiles(nodes, phase) };
}

interface ProfileNode {
  readonly id: number;
  readonly callFrame: {
    readonly functionName: string;
    readonly url: string;
    readonly lineNumber: number;
  };
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

export interface SelfTime {
  readonly fn: string;
  readonly selfMs: number;
  /** Of the profiles' wall time. */
  readonly pct: number;
}

export interface ProfileSummary {
  readonly files: readonly string[];
  readonly wallMs: number;
  /** Sampled time not idle, in % of wall time (how busy the thread was). */
  readonly busyPct: number;
  /** Functions (name, file, line) by self time, largest first; (idle) left out. */
  readonly top: readonly SelfTime[];
  /** The same by package (or node internals, GC, …). */
  readonly byPackage: readonly SelfTime[];
}

/** Self time per function summed over one or more profiles (e.g. the rounds of a phase). */
export function summarizeProfile(files: string | readonly string[], topCount = 15): ProfileSummary {
  const list = typeof files === "string" ? [files] : files;
  const selfUs = new Map<string, number>();
  const packageUs = new Map<string, number>();
  let wallUs = 0;
  for (const file of list) {
    const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
    const frameOf = new Map<number, ProfileNode["callFrame"]>();
    for (const n of profile.nodes) frameOf.set(n.id, n.callFrame);
    for (let i = 0; i < profile.samples.length; i++) {
      const frame = frameOf.get(profile.samples[i]!);
      // A sample stands for the time until the next one.
      const us = profile.timeDeltas[i + 1] ?? 0;
      const fn = frame === undefined ? "?" : describe(frame);
      selfUs.set(fn, (selfUs.get(fn) ?? 0) + us);
      const pkg = frame === undefined ? "?" : packageOf(frame);
      packageUs.set(pkg, (packageUs.get(pkg) ?? 0) + us);
    }
    wallUs += profile.endTime - profile.startTime;
  }
  const idleUs = selfUs.get("(idle)") ?? 0;
  selfUs.delete("(idle)");
  packageUs.delete("(idle)");
  const ranked = (m: Map<string, number>, n: number) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([fn, us]) => ({ fn, selfMs: us / 1000, pct: (us / wallUs) * 100 }));
  return {
    files: list,
    wallMs: wallUs / 1000,
    busyPct: ((wallUs - idleUs) / wallUs) * 100,
    top: ranked(selfUs, topCount),
    byPackage: ranked(packageUs, 10),
  };
}

/** Which package a frame belongs to: an npm package, one of ours, node itself, or V8. */
function packageOf(frame: ProfileNode["callFrame"]): string {
  const url = frame.url;
  if (url === "") return frame.functionName.startsWith("(") ? frame.functionName : "(native)";
  if (url.startsWith("node:")) return "node:internal";
  const nm = url.lastIndexOf("node_modules/");
  if (nm >= 0) {
    const rest = url.slice(nm + "node_modules/".length).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const pk = url.indexOf("/packages/");
  if (pk >= 0) return `@vgpu-ha/${url.slice(pk + "/packages/".length).split("/")[0]}`;
  return path.basename(url);
}

function describe(frame: ProfileNode["callFrame"]): string {
  const name = frame.functionName === "" ? "(anonymous)" : frame.functionName;
  if (frame.url === "") return name;
  return `${name} ${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
}

/** The part of a script URL worth reading: the package and file. */
function shortUrl(url: string): string {
  const p = url.replace(/^file:\/\//, "");
  const nm = p.lastIndexOf("node_modules/");
  if (nm >= 0) return p.slice(nm + "node_modules/".length);
  const pk = p.indexOf("/packages/");
  if (pk >= 0) return p.slice(pk + "/packages/".length);
  return p.startsWith("node:") ? p : path.basename(p);
}

export function formatSummary(s: ProfileSummary, title?: string): string {
  const rows = (list: readonly SelfTime[]) =>
    list.map(
      (t) => `  ${t.pct.toFixed(1).padStart(5)} %  ${t.selfMs.toFixed(1).padStart(8)} ms  ${t.fn}`,
    );
  const name = title ?? (s.files.length === 1 ? s.files[0]! : `${s.files.length} profiles`);
  return [
    `${name}: ${s.wallMs.toFixed(0)} ms wall, busy ${s.busyPct.toFixed(1)} %; self time by package:`,
    ...rows(s.byPackage),
    "  top functions:",
    ...rows(s.top),
  ].join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error("usage: node bench/dist/cpu-profile.js FILE.cpuprofile… (summed)");
    process.exit(2);
  }
  console.log(formatSummary(summarizeProfile(files, 25)));
}
