// Proves the operator conventions of the two programs, run as child processes (the built bins,
// through the workspace's node_modules/.bin links as `npx` runs them): --version and --help on
// both; vgpud refuses each config that used to fail only at bind or later with exit 2 and a line
// naming the field (#12); `vgpud --check` binds the listeners and names one in use; vgpuctl's
// VGPUCTL_* variables (and the old VGPU_NODES/VGPU_TOKEN) never stop vgpud.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeCerts } from "../support/certs.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const BIN = join(ROOT, "node_modules/.bin");
const VERSION = (
  JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }
).version;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "vgpu-cli-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs a bin as a shell would (its own shebang) with only the given VGPU* variables. */
function run(bin: "vgpud" | "vgpuctl", args: string[], vars: Record<string, string> = {}) {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith("VGPU")),
  );
  const r = spawnSync(join(BIN, bin), args, {
    encoding: "utf8",
    timeout: 30_000,
    env: { ...env, ...vars },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** vgpud on a config file holding `config` (listeners on free ports unless given). */
function vgpudWith(config: Record<string, unknown>, args: string[] = []) {
  const file = join(dir, `config-${Math.random().toString(36).slice(2)}.json`);
  const anyPort = { listen: "127.0.0.1:0" };
  const base = { stateDir: join(dir, "state"), guest: anyPort, ops: anyPort, replication: anyPort };
  writeFileSync(file, JSON.stringify({ ...base, ...config }));
  return run("vgpud", ["--config", file, ...args]);
}

describe("--version and --help", () => {
  it("both print the package version", () => {
    for (const bin of ["vgpud", "vgpuctl"] as const) {
      const r = run(bin, ["--version"]);
      expect(r.code, r.err).toBe(0);
      expect(r.out.trim()).toBe(VERSION);
    }
  });

  it("vgpud --help lists its options, environment, exit codes and documentation", () => {
    const r = run("vgpud", ["--help"]);
    expect(r.code).toBe(0);
    for (const text of ["--config", "--print-config", "--check", "--version", "VGPU_CONFIG"]) {
      expect(r.out).toContain(text);
    }
    expect(r.out).toMatch(/Exit codes:\n {2}0 .*\n {2}1 .*\n {2}2 /);
    expect(r.out).toContain("docs/configuration.md");
  });

  it("an unknown option or argument is exit 2", () => {
    expect(run("vgpud", ["--bogus"]).code).toBe(2);
    expect(run("vgpud", ["start"]).code).toBe(2);
  });
});

describe("vgpud refuses at start, exit 2 naming the field", () => {
  let certs: Record<string, { ca: string; cert: string; key: string }>;
  beforeAll(() => {
    certs = makeCerts(join(dir, "tls"), "host-a", "host-b");
  });

  it.each([
    [
      "a port out of range",
      { guest: { listen: "127.0.0.1:70000" } },
      /^config: guest\.listen = "127\.0\.0\.1:70000": port must be 0 to 65535$/m,
    ],
    [
      "two listeners on one address",
      { guest: { listen: "127.0.0.1:7411" }, ops: { listen: "0.0.0.0:7411" } },
      /^config: ops\.listen: "0\.0\.0\.0:7411" is also guest\.listen/m,
    ],
    [
      "peer.name == nodeId",
      { nodeId: "host-a", peer: { name: "host-a" } },
      /^config: peer\.name: must not be/m,
    ],
    [
      "two tenants sharing a token",
      {
        tenants: [
          { name: "a", token: "shared-token-1" },
          { name: "b", token: "shared-token-1" },
        ],
      },
      /^config: tenants\.1\.token = \(hidden\): the same token as tenants\.0/m,
    ],
    [
      "vramBytes above the host's memory",
      { device: { vramBytes: Math.min(2 ** 40, 2 * totalmem()) } },
      /^config: device\.vramBytes = \d+: more than this host's memory/m,
    ],
  ])("%s", (_, config, line) => {
    const r = vgpudWith(config);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(line);
    expect(r.err).not.toMatch(/\n\s+at /); // no stack trace
  });

  it("a certificate that does not name nodeId", () => {
    const r = vgpudWith({ nodeId: "host-b", peer: { name: "host-c" }, tls: certs["host-a"] });
    expect(r.code, r.err).toBe(2);
    expect(r.err.trim()).toMatch(
      /^config: tls\.cert = ".*host-a\.crt": names host-a, not nodeId host-b$/,
    );
  });

  it("an unknown VGPU_* variable, by its name; vgpuctl's variables are left alone", () => {
    const unknown = run("vgpud", ["--print-config"], { VGPU_LOG_LEVEL: "debug" });
    expect(unknown.code).toBe(2);
    expect(unknown.err.trim()).toBe(
      "config: VGPU_LOG_LEVEL: unknown variable (vgpud has no field logLevel)",
    );
    const vgpuctlVars = {
      VGPUCTL_NODES: "http://127.0.0.1:9400",
      VGPUCTL_TOKEN: "an-admin-token-0001",
      VGPU_NODES: "http://127.0.0.1:9400",
      VGPU_TOKEN: "an-admin-token-0001",
    };
    const ok = run("vgpud", ["--print-config"], vgpuctlVars);
    expect(ok.code, ok.err).toBe(0);
    expect(JSON.parse(ok.out)).toMatchObject({ nodeId: "node-a" });
  });
});

describe("vgpud --check", () => {
  let taken: Server;
  let port: number;
  beforeAll(async () => {
    taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    port = (taken.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => taken.close(() => resolve())));

  it("passes a good config, tls files included, and says so", () => {
    const certs = makeCerts(join(dir, "tls"), "host-a", "host-b");
    const r = vgpudWith(
      { nodeId: "host-a", role: "standby", peer: { name: "host-b" }, tls: certs["host-a"] },
      ["--check"],
    );
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(
      /^vgpud: config ok \(node host-a, role standby, tls files ok, ports free\)$/m,
    );
  });

  it("names a listener whose port is in use", () => {
    const r = vgpudWith(
      { role: "standby", peer: { name: "node-b" }, replication: { listen: `127.0.0.1:${port}` } },
      ["--check"],
    );
    expect(r.code).toBe(2);
    expect(r.err.trim()).toBe(
      `config: replication.listen = "127.0.0.1:${port}": in use on this host`,
    );
  });
});

describe("vgpuctl's environment", () => {
  it.each(["VGPUCTL_NODES", "VGPU_NODES"])("reads the nodes from %s", (name) => {
    const r = run("vgpuctl", ["status"], { [name]: "http://127.0.0.1:1" });
    expect(r.code).toBe(3); // unreachable: the URL came from the variable
    expect(r.out + r.err).toContain("127.0.0.1:1");
  });

  it("VGPUCTL_NODES wins over the old name", () => {
    const r = run("vgpuctl", ["status"], {
      VGPUCTL_NODES: "http://127.0.0.1:1",
      VGPU_NODES: "http://127.0.0.1:2",
    });
    expect(r.out + r.err).toContain("127.0.0.1:1");
    expect(r.out + r.err).not.toContain("127.0.0.1:2");
  });
});
