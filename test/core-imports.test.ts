// Proves the pure core loads no I/O: a fresh `node` imports every module of every package's
// `core/` folder (built, under dist/), `@vgpu-ha/common/core` and `@vgpu-ha/gpu-model`, and no
// `fs`, `net`, `tls`, `http2`… (bare or `node:`) is loaded. It also proves the probe sees them:
// the package barrel (grpc, TLS, config files) and planted imports of each kind are reported.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { probeImports } from "./support/import-probe.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const packages = join(root, "packages");

/** The shipped modules of each `packages/<name>/src/**\/core/` folder, as their built files. */
function coreModules(): string[] {
  const found: string[] = [];
  for (const pkg of readdirSync(packages)) {
    const src = join(packages, pkg, "src");
    for (const file of readdirSync(src, { recursive: true, encoding: "utf8" })) {
      const inCore = file.split("/").slice(0, -1).includes("core");
      if (!inCore || !file.endsWith(".ts") || /\.(test|d)\.ts$/.test(file)) continue;
      found.push(join(packages, pkg, "dist", file.replace(/\.ts$/, ".js")));
    }
  }
  return found.sort();
}

/** A module as a report names it: relative to the repository for files. */
const short = (m: string) => m.replaceAll(pathToFileURL(root).href, "").replaceAll(root, "");

describe("the pure core imports no I/O", () => {
  const modules = coreModules();

  it("finds the core folders of common, primary and standby", () => {
    for (const pkg of ["common", "primary", "standby"]) {
      expect(modules.some((m) => m.startsWith(join(packages, pkg, "dist", "core")))).toBe(true);
    }
  });

  it("loads none of fs, net, tls, http2… from any core module or the GPU model", async () => {
    const entries = [
      "@vgpu-ha/common/core",
      "@vgpu-ha/gpu-model",
      ...modules.map((m) => pathToFileURL(m).href),
    ];
    const findings = await probeImports(entries, root);
    expect(findings.map((f) => f.module)).toEqual(entries);
    const offenders = findings
      .filter((f) => f.loaded.length > 0)
      .map((f) => `${short(f.module)} loads ${f.loaded.map(short).join(", ")}`);
    expect(offenders).toEqual([]);
  });

  it("exports every module of common's core/ from @vgpu-ha/common/core", () => {
    const dir = join(packages, "common", "src", "core");
    const index = readFileSync(join(dir, "index.ts"), "utf8");
    const files = readdirSync(dir).filter(
      (f) => f.endsWith(".ts") && !/\.test\.ts$|^index\.ts$/.test(f),
    );
    const missing = files.filter((f) => !index.includes(`"./${f.replace(/\.ts$/, ".js")}"`));
    expect(missing).toEqual([]);
  });
});

describe("the import probe", () => {
  const dir = mkdtempSync(join(tmpdir(), "import-probe-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const plant = (file: string, text: string) => {
    writeFileSync(join(dir, file), text);
    return pathToFileURL(join(dir, file)).href;
  };

  it("reports I/O modules imported bare or node:-prefixed, by ESM import or CJS require", async () => {
    const planted = [
      plant("esm-prefixed.mjs", 'import "node:net";\nimport "node:fs/promises";\n'),
      plant("esm-bare.mjs", 'import "tls";\n'),
      plant("cjs.cjs", 'require("node:http2");\nrequire("fs");\n'),
      plant("clean.mjs", 'import "node:crypto";\nexport const x = 1;\n'),
    ];
    const loaded = (await probeImports(planted, root)).map((f) =>
      f.loaded.map((l) => l.split(" ")[0]),
    );
    expect(loaded[0]).toEqual(expect.arrayContaining(["net", "fs/promises"]));
    expect(loaded[1]).toContain("tls");
    expect(loaded[2]).toEqual(expect.arrayContaining(["http2", "fs"]));
    expect(loaded[3]).toEqual([]);
  });

  it("reports what the package barrel drags in (grpc's http2 and tls, the config loader's fs)", async () => {
    const [barrel] = await probeImports(["@vgpu-ha/common"], root);
    const builtins = new Set(barrel!.loaded.map((l) => l.split(" ")[0]));
    expect([...builtins]).toEqual(expect.arrayContaining(["http2", "tls", "fs"]));
  });
});
