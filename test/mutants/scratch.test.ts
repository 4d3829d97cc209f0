// Proves the scratch tree is a faithful, separate copy: tracked and untracked-but-not-ignored
// files are copied and ignored ones are not, installed packages are linked to the caller's
// node_modules while workspace links resolve into the copy, a planted mutant changes only the
// copy and is put back, a stale anchor is refused, and remove() leaves nothing behind.
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { StaleMutantError } from "./mutant.js";
import { checkAnchor, ScratchTree } from "./scratch.js";

let root: string;
const trees: ScratchTree[] = [];

function write(path: string, text: string): void {
  mkdirSync(join(root, path, ".."), { recursive: true });
  writeFileSync(join(root, path), text);
}

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), "mutants-root-")));
  write(".gitignore", "node_modules/\ndist/\n");
  write("packages/a/src/x.ts", "export const x = 1;\n");
  write("packages/a/dist/x.js", "built\n");
  write("notes.txt", "untracked, not ignored\n");
  write("node_modules/lib/index.js", "module.exports = 1;\n");
  write("node_modules/.cache/junk", "cache\n");
  mkdirSync(join(root, "node_modules/@scope"));
  symlinkSync("../../packages/a", join(root, "node_modules/@scope/a"));
  execFileSync("git", ["init", "-q"], { cwd: root });
  execFileSync("git", ["add", ".gitignore", "packages/a/src/x.ts"], { cwd: root });
});

afterEach(() => {
  for (const tree of trees.splice(0)) tree.remove();
  rmSync(root, { recursive: true, force: true });
});

const mutant = {
  name: "one",
  what: "x is 2",
  file: "packages/a/src/x.ts",
  original: "export const x = 1;",
  replacement: "export const x = 2;",
};

describe("ScratchTree", () => {
  it("copies tracked and untracked files, not ignored ones", () => {
    const tree = ScratchTree.create(root);
    trees.push(tree);
    expect(readFileSync(join(tree.dir, "packages/a/src/x.ts"), "utf8")).toBe(
      "export const x = 1;\n",
    );
    expect(existsSync(join(tree.dir, "notes.txt"))).toBe(true);
    expect(existsSync(join(tree.dir, "packages/a/dist"))).toBe(false);
  });

  it("links installed packages to the caller's, workspace links into the copy", () => {
    const tree = ScratchTree.create(root);
    trees.push(tree);
    expect(realpathSync(join(tree.dir, "node_modules/lib"))).toBe(join(root, "node_modules/lib"));
    expect(realpathSync(join(tree.dir, "node_modules/@scope/a"))).toBe(
      realpathSync(join(tree.dir, "packages/a")),
    );
    expect(existsSync(join(tree.dir, "node_modules/.cache"))).toBe(false);
  });

  it("plants a mutant in the copy only, and puts the original back", () => {
    const tree = ScratchTree.create(root);
    trees.push(tree);
    const restore = tree.plant(mutant);
    expect(readFileSync(join(tree.dir, mutant.file), "utf8")).toBe("export const x = 2;\n");
    expect(readFileSync(join(root, mutant.file), "utf8")).toBe("export const x = 1;\n");
    restore();
    expect(readFileSync(join(tree.dir, mutant.file), "utf8")).toBe("export const x = 1;\n");
  });

  it("refuses a stale anchor in the caller's tree", () => {
    expect(() => checkAnchor(root, mutant)).not.toThrow();
    const stale = { ...mutant, original: "export const x = 3;" };
    expect(() => checkAnchor(root, stale)).toThrow(StaleMutantError);
  });

  it("leaves nothing behind once removed", () => {
    const tree = ScratchTree.create(root);
    tree.remove();
    expect(existsSync(tree.dir)).toBe(false);
  });
});
