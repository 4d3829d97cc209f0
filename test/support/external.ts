// External programs some tests need (etcd, prometheus, promtool, systemd-analyze). Outside CI a
// missing one skips its tests with a loud line; in CI (CI=true) it fails them, so a test can
// never pass by silently not running.
import { execFileSync } from "node:child_process";

/** The absolute path of `name` on PATH, or undefined. */
export function findBinary(name: string): string | undefined {
  try {
    const out = execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).trim();
    return out === "" ? undefined : out;
  } catch {
    return undefined;
  }
}

/**
 * The binary's path when present. When missing: throws in CI; elsewhere prints why the tests
 * that need it are skipped and returns undefined (use with `describe.skipIf(!path)`).
 */
export function requireBinary(name: string, debianPackage: string): string | undefined {
  const path = findBinary(name);
  if (path) return path;
  const why = `'${name}' not found (Debian package ${debianPackage}; .ci/run installs it)`;
  if (process.env.CI === "true") throw new Error(`${why}: required in CI`);
  console.warn(`SKIPPING tests that need ${why}`);
  return undefined;
}
