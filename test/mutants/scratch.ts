// The scratch tree mutants are planted in: a copy of the caller's working tree (tracked files
// and untracked ones git does not ignore) in a temporary directory, built there, so the
// caller's checkout is never touched. node_modules is not copied: the copy gets a directory of
// links to the caller's installed packages, except the workspace links (relative, to
// ../../packages/NAME), which are made again so that they point into the copy.
import { execFileSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { applyMutant, type Mutant } from "./mutant.js";

/** Checks a mutant's anchor in the tree at `root` (throws StaleMutantError). */
export function checkAnchor(root: string, mutant: Mutant): void {
  applyMutant(readFileSync(join(root, mutant.file), "utf8"), mutant);
}

export class ScratchTree {
  private constructor(readonly dir: string) {}

  /** Copies the working tree at `root` into a new temporary directory. */
  static create(root: string): ScratchTree {
    const dir = mkdtempSync(join(tmpdir(), "vgpu-mutants-"));
    const listed = execFileSync(
      "git",
      ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
      { cwd: root, maxBuffer: 64 * 1024 * 1024 },
    )
      .toString()
      .split("\0")
      .filter((f) => f.length > 0);
    for (const file of listed) {
      const from = join(root, file);
      if (!existsSync(from)) continue; // deleted in the working tree, not yet in the index
      mkdirSync(dirname(join(dir, file)), { recursive: true });
      cpSync(from, join(dir, file), { verbatimSymlinks: true });
    }
    linkModules(join(root, "node_modules"), join(dir, "node_modules"));
    for (const pkg of readdirSync(join(dir, "packages"))) {
      const modules = join(root, "packages", pkg, "node_modules");
      if (existsSync(modules)) linkModules(modules, join(dir, "packages", pkg, "node_modules"));
    }
    return new ScratchTree(dir);
  }

  /** Plants the mutant in the copy; the function returned puts the original back. */
  plant(mutant: Mutant): () => void {
    const path = join(this.dir, mutant.file);
    const original = readFileSync(path, "utf8");
    writeFileSync(path, applyMutant(original, mutant));
    return () => writeFileSync(path, original);
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Makes `to` a directory of links to the entries of `from`: absolute links to installed
 * packages, the same relative links for workspace packages (so they resolve in the copy).
 * Scope directories (@scope) are made as directories and linked entry by entry; the caller's
 * caches (.vite, .package-lock.json…) are left out, .bin is linked.
 */
function linkModules(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  for (const name of readdirSync(from)) {
    if (name.startsWith(".") && name !== ".bin") continue;
    const source = join(from, name);
    const stat = lstatSync(source);
    if (stat.isSymbolicLink()) {
      // A workspace link (../../packages/NAME) made again resolves into the copy.
      symlinkSync(readlinkSync(source), join(to, name));
    } else if (name.startsWith("@") && stat.isDirectory()) {
      linkModules(source, join(to, name));
    } else {
      symlinkSync(source, join(to, name));
    }
  }
}
