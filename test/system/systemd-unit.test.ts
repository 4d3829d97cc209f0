// Proves deploy/systemd/vgpud.service is a unit systemd accepts: `systemd-analyze verify` on a
// copy whose ExecStart runs this repository's built vgpud with the current node (verify checks
// that the program exists), with exit code 0 and not one warning; `systemd-analyze security
// --offline` rates its sandbox at exposure 2.0 or less; and the settings the daemon depends on
// are there (Type=exec, restart on failure, the state directory, no MemoryDenyWriteExecute).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { VGPUD_BIN } from "@vgpu-ha/daemon";
import { afterAll, describe, expect, it } from "vitest";
import { requireBinary } from "../support/external.js";

const analyze = requireBinary("systemd-analyze", "systemd");
const UNIT = fileURLToPath(new URL("../../deploy/systemd/vgpud.service", import.meta.url));
const text = readFileSync(UNIT, "utf8");

/** The values of `key=` in the unit, in order (comments left out). */
const values = (key: string) =>
  text
    .split("\n")
    .filter((l) => l.startsWith(`${key}=`))
    .map((l) => l.slice(key.length + 1));

describe("deploy/systemd/vgpud.service: settings", () => {
  it("runs vgpud with its config file, as Type=exec, restarted on failure", () => {
    expect(values("Type")).toEqual(["exec"]);
    expect(values("ExecStart")).toHaveLength(1);
    expect(values("ExecStart")[0]).toMatch(
      /^\/usr\/bin\/vgpud --config \/etc\/vgpu-ha\/vgpud\.yaml$/,
    );
    expect(values("Restart")).toEqual(["on-failure"]);
    expect(values("KillSignal")).toEqual(["SIGTERM"]);
    // an invalid config (exit 2) is not retried
    expect(values("RestartPreventExitStatus")).toEqual(["2"]);
  });

  it("keeps the epoch in its state directory, as its own user, sandboxed", () => {
    expect(values("StateDirectory")).toEqual(["vgpu-ha"]);
    // A static system user (the package's sysusers.d entry), so a tls key can be root:vgpu 0640.
    expect(values("User")).toEqual(["vgpu"]);
    expect(values("Group")).toEqual(["vgpu"]);
    expect(values("DynamicUser")).toEqual([]);
    expect(values("ConditionPathExists")).toEqual(["/etc/vgpu-ha/vgpud.yaml"]);
    for (const key of ["NoNewPrivileges", "ProtectHome", "PrivateTmp", "PrivateDevices"]) {
      expect(values(key), key).toEqual(["yes"]);
    }
    expect(values("ProtectSystem")).toEqual(["strict"]);
    expect(values("RestrictAddressFamilies")).toEqual(["AF_INET AF_INET6 AF_UNIX"]);
    expect(values("SystemCallFilter")).toContain("@system-service");
    expect(Number(values("LimitNOFILE")[0])).toBeGreaterThanOrEqual(65536);
    // V8's JIT needs writable+executable memory: node aborts under MemoryDenyWriteExecute
    expect(values("MemoryDenyWriteExecute")).toEqual([]);
  });
});

describe.skipIf(!analyze)("deploy/systemd/vgpud.service: systemd-analyze", () => {
  const dir = mkdtempSync(join(tmpdir(), "vgpu-unit-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The unit with ExecStart pointing at this checkout's vgpud and this node. */
  const localCopy = () => {
    const file = join(dir, "vgpud.service");
    const exec = `ExecStart=${process.execPath} ${VGPUD_BIN} --config /etc/vgpu-ha/vgpud.yaml`;
    writeFileSync(file, text.replace(/^ExecStart=.*$/m, exec));
    return file;
  };
  const run = (...args: string[]) => {
    const r = spawnSync(analyze!, args, { encoding: "utf8", timeout: 30_000 });
    return { code: r.status, out: r.stdout, err: r.stderr };
  };

  it("passes systemd-analyze verify without a warning", () => {
    // --man=no: the man page vgpud(8) comes with the package (debian-package.test.ts verifies
    // the installed unit with it).
    const r = run("verify", "--man=no", localCopy());
    expect(r.err).toBe("");
    expect(r.code, r.out).toBe(0);
  });

  it("fails verify when the program is missing (so the check above means something)", () => {
    const file = join(dir, "vgpud-missing.service");
    writeFileSync(file, text.replace(/^ExecStart=.*$/m, "ExecStart=/nonexistent/node x.js"));
    const r = run("verify", file);
    expect(r.code).not.toBe(0);
    expect(r.err).toContain("/nonexistent/node");
  });

  it("is rated exposure 2.0 or less by systemd-analyze security", () => {
    const r = run("security", "--offline=true", "--threshold=20", localCopy());
    expect(r.code, r.out + r.err).toBe(0);
    const level = /Overall exposure level for vgpud\.service: ([\d.]+)/.exec(r.out);
    expect(level, r.out).not.toBeNull();
    expect(Number(level![1])).toBeLessThanOrEqual(2);
  });
});
