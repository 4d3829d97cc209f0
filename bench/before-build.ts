// Another build of the project to run side by side with this one: `--before REV` (a git
// revision) or `--before DIR` (a checkout already built, as BENCH_BEFORE=DIR for hot-paths).
// A revision is exported with `git archive` into os.tmpdir()/vgpu-bench-before-<sha> (no
// worktree is registered), then `npm ci` and `npm run build` run there once; later runs of the
// same revision reuse it. Its vgpud starts through its own spawnVgpud.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { spawnVgpud } from "@vgpu-ha/daemon";

const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));
const VGPUD = "packages/daemon/dist/bin/vgpud.js";
const DAEMON_INDEX = "packages/daemon/dist/index.js";

export interface OtherBuild {
  /** What the build is: the revision and commit, or the directory given. */
  readonly name: string;
  readonly dir: string;
  readonly spawn: typeof spawnVgpud;
}

const run = (cmd: string, args: readonly string[], cwd: string) =>
  execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim();

/** The built tree of `revOrDir`, building it first when needed. */
export async function otherBuild(revOrDir: string): Promise<OtherBuild> {
  if (existsSync(path.join(revOrDir, VGPUD))) {
    return load(`dir ${path.resolve(revOrDir)}`, path.resolve(revOrDir));
  }
  const sha = run("git", ["rev-parse", "--verify", `${revOrDir}^{commit}`], REPO_ROOT);
  const subject = run("git", ["log", "-1", "--format=%s", sha], REPO_ROOT);
  const dir = path.join(os.tmpdir(), `vgpu-bench-before-${sha.slice(0, 12)}`);
  if (!existsSync(path.join(dir, VGPUD))) {
    console.log(`before: building ${revOrDir} (${sha.slice(0, 12)}) in ${dir} (once)`);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    execFileSync("sh", ["-c", `git archive ${sha} | tar -x -C "${dir}"`], {
      cwd: REPO_ROOT,
      stdio: ["ignore", "inherit", "inherit"],
    });
    run("npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"], dir);
    run("npm", ["run", "build", "--silent"], dir);
  }
  return load(`${revOrDir} = ${sha.slice(0, 12)} "${subject}"`, dir);
}

async function load(name: string, dir: string): Promise<OtherBuild> {
  const daemon = (await import(pathToFileURL(path.join(dir, DAEMON_INDEX)).href)) as {
    spawnVgpud: typeof spawnVgpud;
  };
  return { name, dir, spawn: daemon.spawnVgpud };
}
