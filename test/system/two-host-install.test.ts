// Proves the two-host walk-through of docs/operations.md from the Debian package alone: two
// builds (`npm run package`, then `-- --version <version>+upgrade1`) are installed with dpkg into
// two throwaway roots (dpkg --root, maintainer scripts run chrootless under DPKG_ROOT: the user
// vgpu lands in the root's /etc/passwd), each root a "host" in its own network namespace
// (test/chaos/hosts.ts: a veth link between the two, a veth to this namespace for the
// operator). The shipped examples host-a.yaml/host-b.yaml are adapted (addresses, state
// directory, VRAM, a longer lease for a shared machine) and each node is started as the
// installed unit says — systemd cannot run here, so the unit's ExecStart line is run directly
// with its EnvironmentFile, Environment and WorkingDirectory, as root, on a PATH without node.
// Then the installed vgpuctl: status, pause, resume, switchover, history; the upgrade of one
// node (stop it, install the second build over the first, start it: both replicate, the two
// `vgpud --version` differ, status shows both versions); verify; and a purge. Every process
// and namespace is removed on success and on failure.
import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { REPLICATION_PROTOCOL_VERSION } from "@vgpu-ha/common";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cleanup } from "../chaos/cleanup.js";
import {
  createNetnsHosts,
  type NodeName,
  type NodePlacement,
  netnsAvailable,
  runNames,
} from "../chaos/hosts.js";
import { findBinary, requireBinary } from "../support/external.js";

const dpkgDeb = requireBinary("dpkg-deb", "dpkg");
const sysusers = requireBinary("systemd-sysusers", "systemd");
const ip = requireBinary("ip", "iproute2");
const netns = netnsAvailable();
if (!netns.ok) {
  const why = `network namespaces are not available (${netns.why})`;
  if (process.env.CI === "true") throw new Error(`${why}: required in CI`);
  console.warn(`SKIPPING the two-host install: ${why}`);
}

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const VERSION = (
  JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }
).version;
const NEXT = `${VERSION}+upgrade1`;
const TOKEN = "two-host-admin-token-0001";
const TENANTS = '[{"name":"tenant-a","token":"two-host-tenant-token","vramQuotaBytes":"64MiB"}]';

interface Host {
  readonly name: "host-a" | "host-b";
  readonly n: NodeName;
  /** The throwaway root the package is installed into. */
  readonly root: string;
  readonly placement: NodePlacement;
  readonly logFile: string;
  node?: { process: ChildProcess; exited: Promise<number | null> };
}

/** `text` with `from` replaced by `to`; an example that no longer has `from` fails loudly. */
function must(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`the shipped example has no "${from}"`);
  return text.replace(from, to);
}

/** VGPUHA_WALKTHROUGH=FILE writes every command the walk-through ran, with its output, there. */
const transcript: string[] = [];
function record<R extends { code: number | null; out: string; err: string }>(
  cmd: string,
  args: string[],
  r: R,
): R {
  if (process.env.VGPUHA_WALKTHROUGH) {
    transcript.push(`$ ${[cmd, ...args].join(" ")}   # exit ${r.code}\n${r.out}${r.err}`);
  }
  return r;
}

const run = (cmd: string, args: string[], env?: Record<string, string>) => {
  const r = spawnSync(cmd, args, { encoding: "utf8", timeout: 120_000, ...(env ? { env } : {}) });
  return record(cmd, args, { code: r.status, out: r.stdout ?? "", err: r.stderr ?? "" });
};

/** run() without blocking: the two hosts install side by side. */
const runAsync = (cmd: string, args: string[]) =>
  new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
    execFile(cmd, args, { encoding: "utf8", timeout: 120_000 }, (e, out, err) =>
      resolve(
        record(cmd, args, { code: e ? (typeof e.code === "number" ? e.code : 1) : 0, out, err }),
      ),
    );
  });

describe.skipIf(!dpkgDeb || !sysusers || !ip || !netns.ok)("two hosts from the package", () => {
  let work: string;
  const debs = { first: "", next: "" };
  const cleanup = new Cleanup();
  let hosts: Record<NodeName, Host>;
  /** A PATH with sh and what the wrappers use, and no node: the package's runtime runs. */
  let bareBin: string;

  const build = (out: string, extra: string[]) => {
    const args = ["run", "--silent", "package", "--", "--out", out, "--fast", ...extra];
    const r = spawnSync("npm", args, { cwd: ROOT, encoding: "utf8", timeout: 400_000 });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    return r.stdout.trim().split("\n").at(-1)!;
  };

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "vgpu-two-hosts-"));
    debs.first = build(join(work, "first"), []);
    debs.next = build(join(work, "next"), ["--version", NEXT]);
    bareBin = join(work, "bin");
    mkdirSync(bareBin);
    for (const tool of ["sh", "dirname", "readlink"]) {
      symlinkSync(findBinary(tool)!, join(bareBin, tool));
    }
    const net = await createNetnsHosts(cleanup);
    const host = (name: Host["name"], n: NodeName): Host => ({
      name,
      n,
      root: join(work, name),
      placement: net.placement[n],
      logFile: join(work, `${name}.log`),
    });
    hosts = { a: host("host-a", "a"), b: host("host-b", "b") };
  }, 900_000);

  afterAll(async () => {
    for (const h of Object.values(hosts ?? {})) h.node?.process.kill("SIGKILL");
    await cleanup.run();
    if (process.env.VGPUHA_WALKTHROUGH) {
      writeFileSync(process.env.VGPUHA_WALKTHROUGH, transcript.join("\n"));
    }
    if (work && !process.env.VGPUHA_TEST_KEEP) rmSync(work, { recursive: true, force: true });
  });

  /** dpkg -i into the host's root; its maintainer scripts run under DPKG_ROOT. */
  function install(h: Host, deb: string) {
    for (const d of ["var/lib/dpkg/info", "var/lib/dpkg/updates", "var/log"]) {
      mkdirSync(join(h.root, d), { recursive: true });
    }
    const status = join(h.root, "var/lib/dpkg/status");
    if (!existsSync(status)) writeFileSync(status, "");
    // --force-depends: the root's dpkg database knows no libc6; this host's libraries serve.
    return runAsync("dpkg", [
      `--root=${h.root}`,
      "--force-script-chrootless",
      "--force-depends",
      "--force-unsafe-io",
      "-i",
      deb,
    ]);
  }

  const dpkg = (h: Host, ...args: string[]) =>
    run("dpkg", [`--root=${h.root}`, "--force-script-chrootless", ...args]);

  const installed = (h: Host, program: string) => join(h.root, "usr/bin", program);
  const versionOf = (h: Host) => run(installed(h, "vgpud"), ["--version"], { PATH: bareBin });

  /** /etc/vgpu-ha/vgpud.yaml from the shipped example, and vgpud.env (docs: Install, 2 and 3). */
  function configure(h: Host): void {
    const etc = join(h.root, "etc/vgpu-ha");
    const [me, peer] = h.n === "a" ? ["10.0.0.1", "10.0.0.2"] : ["10.0.0.2", "10.0.0.1"];
    const p = h.placement;
    let yaml = readFileSync(join(etc, `examples/${h.name}.yaml`), "utf8");
    yaml = must(yaml, `listen: ${me}:7400`, `listen: ${p.guestListen}`);
    yaml = must(yaml, `listen: ${me}:9400`, `listen: ${p.opsListen}`);
    yaml = must(yaml, `listen: ${me}:7500`, `listen: ${p.replicationListen}`);
    yaml = must(
      yaml,
      `replicationAddress: ${peer}:7500`,
      `replicationAddress: ${p.peerReplicationAddress}`,
    );
    yaml = must(yaml, `guestAddress: ${peer}:7400`, `guestAddress: ${p.peerGuestAddress}`);
    yaml = must(yaml, "stateDir: /var/lib/vgpu-ha", `stateDir: ${h.root}/var/lib/vgpu-ha`);
    yaml = must(yaml, "vramBytes: 8GiB", "vramBytes: 256MiB");
    yaml = must(yaml, "maxBoBytes: 1GiB", "maxBoBytes: 64MiB");
    // Six engineers share two cores here: a 3 s lease, so a slow moment is no failover.
    yaml = must(yaml, "durationMs: 500", "durationMs: 3000");
    yaml = must(yaml, "heartbeatMs: 100", "heartbeatMs: 200");
    yaml = must(yaml, "driftMarginMs: 50", "driftMarginMs: 200");
    writeFileSync(join(etc, "vgpud.yaml"), yaml, { mode: 0o644 });
    writeFileSync(join(etc, "vgpud.env"), `VGPU_OPS__TOKEN=${TOKEN}\nVGPU_TENANTS='${TENANTS}'\n`, {
      mode: 0o600,
    });
  }

  /** The installed unit's ExecStart, EnvironmentFile, Environment and WorkingDirectory. */
  function unitCommand(h: Host) {
    const unit = readFileSync(join(h.root, "usr/lib/systemd/system/vgpud.service"), "utf8");
    const field = (name: string) => {
      const m = new RegExp(`^${name}=(.*)$`, "m").exec(unit);
      if (!m) throw new Error(`the unit has no ${name}=`);
      return m[1]!;
    };
    const inRoot = (path: string) => (path.startsWith("/") ? join(h.root, path) : path);
    const argv = field("ExecStart").split(" ").map(inRoot);
    const env: Record<string, string> = { PATH: bareBin };
    const [k, v] = field("Environment").split("=");
    env[k!] = v!;
    const envFile = inRoot(field("EnvironmentFile").replace(/^-/, ""));
    for (const line of readFileSync(envFile, "utf8").split("\n")) {
      const m = /^([A-Z0-9_]+)=(.*)$/.exec(line);
      if (m) env[m[1]!] = m[2]!.replace(/^'(.*)'$/, "$1");
    }
    return { argv, env, cwd: inRoot(field("WorkingDirectory")) };
  }

  /** Starts the node in the host's namespace, as the unit would (its state directory made). */
  function start(h: Host): void {
    const { argv, env, cwd } = unitCommand(h);
    mkdirSync(cwd, { recursive: true, mode: 0o700 }); // StateDirectory=vgpu-ha
    const log = openSync(h.logFile, "a");
    const child = spawn(ip!, ["netns", "exec", runNames(process.pid).namespace(h.n), ...argv], {
      cwd,
      env,
      stdio: ["ignore", log, log],
    });
    closeSync(log);
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    h.node = { process: child, exited };
  }

  /** SIGTERM, as `systemctl stop` sends; vgpud drains and exits 0. */
  async function stop(h: Host): Promise<number | null> {
    const node = h.node!;
    node.process.kill("SIGTERM");
    const code = await node.exited;
    h.node = undefined;
    return code;
  }

  /** The installed vgpuctl of host-a's root, run from this namespace (the operator's host). */
  const vgpuctl = (...args: string[]) =>
    run(installed(hosts.a, "vgpuctl"), args, {
      PATH: bareBin,
      VGPUCTL_NODES: `${hosts.a.placement.opsUrl},${hosts.b.placement.opsUrl}`,
      VGPUCTL_TOKEN: TOKEN,
    });

  /** `vgpuctl status`'s row of one node, split into its columns. */
  const row = (table: string, node: string) =>
    table
      .split("\n")
      .find((l) => l.startsWith(`${node} `))
      ?.split(/\s{2,}/) ?? [];

  const logs = () =>
    Object.values(hosts)
      .map(
        (h) =>
          `--- ${h.name}\n${existsSync(h.logFile) ? readFileSync(h.logFile, "utf8").slice(-3000) : ""}`,
      )
      .join("\n");

  it("install, start, status, pause, resume, switchover, history, upgrade of one node, purge", async () => {
    const { a, b } = hosts;
    const hostHadVgpu = getentVgpu();
    // Install (docs: Install on two hosts, 1).
    const installs = await Promise.all([install(a, debs.first), install(b, debs.first)]);
    for (const [i, h] of [a, b].entries()) {
      const r = installs[i]!;
      expect(r.code, r.out + r.err).toBe(0);
      expect(readFileSync(join(h.root, "etc/passwd"), "utf8")).toMatch(/^vgpu:x:/m);
      expect(versionOf(h).out.trim()).toBe(VERSION);
      expect(run(installed(h, "vgpuctl"), ["--version"], { PATH: bareBin }).out.trim()).toBe(
        VERSION,
      );
    }
    expect(getentVgpu()).toBe(hostHadVgpu); // this machine's users are untouched

    // Configure and check (2, 3), start the standby host first, then the primary (6).
    for (const h of [a, b]) {
      configure(h);
      const { argv, env } = unitCommand(h);
      const ns = runNames(process.pid).namespace(h.n);
      const check = run(ip!, ["netns", "exec", ns, argv[0]!, "--check", ...argv.slice(1)], env);
      expect(check.code, check.err).toBe(0);
      expect(check.out).toMatch(new RegExp(`^vgpud: config ok \\(node ${h.name}, `));
    }
    start(b);
    start(a);
    const ready = vgpuctl("wait-ready", "--timeout", "60");
    expect(ready.code, ready.out + ready.err + logs()).toBe(0);

    let status = vgpuctl("status");
    expect(status.code, status.err).toBe(0);
    expect(row(status.out, "host-a")).toEqual(expect.arrayContaining(["primary", VERSION, "yes"]));
    expect(row(status.out, "host-b")).toEqual(expect.arrayContaining(["standby", VERSION, "yes"]));

    // Maintenance mode.
    const pause = vgpuctl("pause");
    expect(pause.code, pause.err).toBe(0);
    expect(vgpuctl("status").out).toMatch(/host-a: MAINTENANCE: paused/);
    const resume = vgpuctl("resume");
    expect(resume.code, resume.err).toBe(0);
    expect(vgpuctl("status").out).not.toMatch(/MAINTENANCE/);

    // Planned switchover: host-b serves, host-a is its standby.
    const switchover = vgpuctl("switchover");
    expect(switchover.code, switchover.out + switchover.err + logs()).toBe(0);
    status = vgpuctl("status");
    expect(row(status.out, "host-a")).toContain("standby");
    expect(row(status.out, "host-b")).toContain("primary");

    const history = vgpuctl("history");
    expect(history.code, history.err).toBe(0);
    expect(history.out).toMatch(/host-a\s+1\s+none → primary\s+cold_start/);
    expect(history.out).toMatch(/host-a\s+2\s+primary → standby\s+switchover/);
    expect(history.out).toMatch(/host-b\s+2\s+standby → primary\s+switchover/);

    // Upgrade host-a, now the standby (docs: Upgrade, 2 and 3): stop, install over, start.
    expect(await stop(a)).toBe(0);
    const upgrade = await install(a, debs.next);
    expect(upgrade.code, upgrade.out + upgrade.err).toBe(0);
    expect(upgrade.out).toContain(`over (${VERSION})`);
    expect(dpkg(a, "-s", "vgpu-ha").out).toMatch(
      new RegExp(`^Version: ${escapeRegExp(NEXT)}$`, "m"),
    );
    start(a);
    const again = vgpuctl("wait-ready", "--timeout", "60");
    expect(again.code, again.out + again.err + logs()).toBe(0);
    expect(versionOf(a).out.trim()).toBe(NEXT);
    expect(versionOf(b).out.trim()).toBe(VERSION);
    status = vgpuctl("status");
    expect(status.code, status.err).toBe(0);
    expect(row(status.out, "host-a")).toEqual(
      expect.arrayContaining(["standby", "replica", NEXT, "yes"]),
    );
    expect(row(status.out, "host-b")).toEqual(expect.arrayContaining(["primary", VERSION, "yes"]));
    expect(row(status.out, "host-b").some((c) => c.endsWith("/streaming"))).toBe(true);
    expect(status.out).toContain(
      `host-b: peer host-a runs vgpud ${NEXT} (replication protocol ${REPLICATION_PROTOCOL_VERSION}), this node ${VERSION}`,
    );
    const verify = vgpuctl("verify");
    expect(verify.code, verify.out + verify.err).toBe(0);

    // Removal (docs: Removal): purge takes the programs and the state directory, not the config.
    expect(await stop(a)).toBe(0);
    expect(await stop(b)).toBe(0);
    const purge = dpkg(b, "--purge", "vgpu-ha");
    expect(purge.code, purge.out + purge.err).toBe(0);
    expect(existsSync(installed(b, "vgpud"))).toBe(false);
    expect(existsSync(join(b.root, "var/lib/vgpu-ha"))).toBe(false);
    expect(existsSync(join(b.root, "etc/vgpu-ha/vgpud.yaml"))).toBe(true);

    // Nothing left: no node process, and the namespaces go with the cleanup.
    await cleanup.run();
    expect(run(ip!, ["netns", "list"]).out).not.toContain(`vgpu-${process.pid}-`);
  }, 180_000);
});

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Whether this machine has a user vgpu (an install into a root must not create one here). */
function getentVgpu(): boolean {
  return spawnSync("getent", ["passwd", "vgpu"]).status === 0;
}
