// Proves `npm run package` makes a Debian package that works on its own: built from this
// checkout, unpacked into a throwaway root (dpkg -x), its vgpud and vgpuctl run with a PATH
// that has no node (the package's own runtime runs them) and print the version; `vgpud --check`
// passes each shipped example (listeners moved to free loopback ports: the examples name the
// hosts 10.0.0.1/2) and names the field of a broken one; the installed unit passes
// `systemd-analyze verify` with the installed program and man page; the control data declares
// what the postinst needs.
import { spawnSync } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findBinary, requireBinary } from "../support/external.js";

const dpkgDeb = requireBinary("dpkg-deb", "dpkg");
const analyze = requireBinary("systemd-analyze", "systemd");
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const VERSION = (
  JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }
).version;
const RUNTIME = (
  JSON.parse(readFileSync(join(ROOT, "deploy/debian/node-runtime.json"), "utf8")) as {
    version: string;
  }
).version;

describe.skipIf(!dpkgDeb || !analyze)("the Debian package (npm run package)", () => {
  let work: string;
  let deb: string;
  let root: string;
  /** A PATH with sh and the tools the wrappers use, and no node. */
  let bareBin: string;

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), "vgpu-deb-"));
    const built = spawnSync("npm", ["run", "--silent", "package", "--", "--out", work, "--fast"], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 280_000,
    });
    expect(built.status, built.stdout + built.stderr).toBe(0);
    deb = built.stdout.trim().split("\n").at(-1)!;
    root = join(work, "root");
    const unpacked = spawnSync("dpkg", ["-x", deb, root], { encoding: "utf8" });
    expect(unpacked.status, unpacked.stderr).toBe(0);
    bareBin = join(work, "bin");
    mkdirSync(bareBin);
    for (const tool of ["sh", "dirname", "readlink"])
      symlinkSync(findBinary(tool)!, join(bareBin, tool));
  }, 300_000);
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  const run = (program: string, args: string[], env: Record<string, string> = {}) => {
    const r = spawnSync(join(root, "usr/bin", program), args, {
      encoding: "utf8",
      timeout: 60_000,
      env: { PATH: bareBin, ...env },
    });
    return { code: r.status, out: r.stdout, err: r.stderr };
  };

  it("is named and described for this version and architecture", () => {
    const arch = spawnSync("dpkg", ["--print-architecture"], { encoding: "utf8" }).stdout.trim();
    expect(deb.endsWith(`vgpu-ha_${VERSION}_${arch}.deb`)).toBe(true);
    const field = (name: string) =>
      spawnSync(dpkgDeb!, ["-f", deb, name], { encoding: "utf8" }).stdout.trim();
    expect(field("Package")).toBe("vgpu-ha");
    expect(field("Version")).toBe(VERSION);
    expect(field("Depends")).toMatch(/^libc6/);
    const info = spawnSync(dpkgDeb!, ["--info", deb, "conffiles"], { encoding: "utf8" }).stdout;
    expect(info.trim().split("\n").sort()).toEqual(
      ["host-a-etcd.yaml", "host-a.yaml", "host-b.yaml", "standalone.yaml"].map(
        (f) => `/etc/vgpu-ha/examples/${f}`,
      ),
    );
  });

  it("runs vgpud and vgpuctl on its own Node.js runtime: --version", () => {
    for (const program of ["vgpud", "vgpuctl"]) {
      const r = run(program, ["--version"]);
      expect(r.code, `${program}: ${r.err}`).toBe(0);
      expect(r.out.trim()).toBe(VERSION);
    }
    const node = spawnSync(join(root, "usr/lib/vgpu-ha/node/bin/node"), ["--version"], {
      encoding: "utf8",
    });
    expect(node.stdout.trim()).toBe(`v${RUNTIME}`);
  });

  it("ships the examples, and vgpud --check passes each", () => {
    const dir = join(root, "etc/vgpu-ha/examples");
    const examples = readdirSync(dir);
    expect(examples.sort()).toEqual([
      "host-a-etcd.yaml",
      "host-a.yaml",
      "host-b.yaml",
      "standalone.yaml",
    ]);
    const loopback = {
      VGPU_GUEST__LISTEN: "127.0.0.1:0",
      VGPU_OPS__LISTEN: "127.0.0.1:0",
      VGPU_REPLICATION__LISTEN: "127.0.0.1:0",
    };
    for (const file of examples) {
      const r = run("vgpud", ["--check", "--config", join(dir, file)], loopback);
      expect(r.code, `${file}: ${r.err}`).toBe(0);
      expect(r.out).toMatch(/^vgpud: config ok /);
    }
    const broken = join(work, "broken.yaml");
    const hostA = readFileSync(join(dir, "host-a.yaml"), "utf8");
    writeFileSync(broken, hostA.replace("name: host-b", "name: host-a"));
    const r = run("vgpud", ["--check", "--config", broken], loopback);
    expect(r.code).toBe(2);
    expect(r.err.trim()).toMatch(/^config: peer\.name: must not be this node's own nodeId/);
  });

  it("installs a unit that systemd-analyze verify accepts, with its program and man page", () => {
    const unit = readFileSync(join(root, "usr/lib/systemd/system/vgpud.service"), "utf8");
    expect(unit).toMatch(/^ExecStart=\/usr\/bin\/vgpud --config \/etc\/vgpu-ha\/vgpud\.yaml$/m);
    // verify checks that ExecStart's program exists: point it at the unpacked one.
    const copy = join(work, "vgpud.service");
    writeFileSync(
      copy,
      unit.replace(/^ExecStart=\/usr\/bin\/vgpud/m, `ExecStart=${root}/usr/bin/vgpud`),
    );
    const r = spawnSync(analyze!, ["verify", copy], {
      encoding: "utf8",
      timeout: 30_000,
      env: { ...process.env, MANPATH: join(root, "usr/share/man") },
    });
    expect(r.stderr).toBe("");
    expect(r.status, r.stdout).toBe(0);
  });

  it("creates the unit's user from sysusers.d, and ships the man pages and bash completion", () => {
    const sysusers = readFileSync(join(root, "usr/lib/sysusers.d/vgpu-ha.conf"), "utf8");
    expect(sysusers).toMatch(/^u vgpu - /m);
    expect(readFileSync(join(root, "usr/lib/systemd/system/vgpud.service"), "utf8")).toMatch(
      /^User=vgpu$/m,
    );
    for (const page of ["vgpud.8.gz", "vgpuctl.8.gz"]) {
      expect(readdirSync(join(root, "usr/share/man/man8"))).toContain(page);
    }
    const completion = join(root, "usr/share/bash-completion/completions/vgpuctl");
    const r = spawnSync(
      "bash",
      [
        "-c",
        `source ${completion}; COMP_WORDS=(vgpuctl sw); COMP_CWORD=1; _vgpuctl; echo "\${COMPREPLY[@]}"`,
      ],
      { encoding: "utf8" },
    );
    expect(r.stdout.trim()).toBe("switchover");
  });
});
