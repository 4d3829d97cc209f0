// Proves config loading: defaults are complete, env overrides reach nested fields, sizes
// accept units, and every invalid value fails with the field, the value and the rule.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, envOverrides, loadConfig, parseConfig, redactConfig } from "./load.js";

describe("config", () => {
  it("fills every default from nothing", () => {
    const c = parseConfig({});
    expect(c.guest.listen).toBe("127.0.0.1:7400");
    expect(c.ops.listen).toBe("127.0.0.1:9400");
    expect(c.ops.token).toBeUndefined();
    expect(c.device.vramBytes).toBe(4 * 1024 ** 3);
    expect(c.tenants[0]?.name).toBe("demo");
  });

  it("maps VGPU_* variables to nested camelCase fields with JSON values", () => {
    expect(
      envOverrides({
        VGPU_DEVICE__VRAM_BYTES: "1GiB",
        VGPU_NODE_ID: "b",
        VGPU_DEVICE__SEED: "9",
        OTHER: "x",
      }),
    ).toEqual({ device: { vramBytes: "1GiB", seed: 9 }, nodeId: "b" });
  });

  it("takes the three replication modes, sync by default, and nothing else", () => {
    expect(parseConfig({}).replication.mode).toBe("sync");
    for (const mode of ["async", "sync", "sync-applied"]) {
      expect(parseConfig({ replication: { mode } }).replication.mode).toBe(mode);
    }
    expect(() => parseConfig({ replication: { mode: "semi" } })).toThrow(/replication\.mode/);
  });

  it("lets the environment override the file", () => {
    const dir = mkdtempSync(join(tmpdir(), "vgpu-cfg-"));
    const file = join(dir, "node.yaml");
    writeFileSync(file, "nodeId: from-file\ndevice:\n  seed: 3\n  vramBytes: 64MiB\n");
    const c = loadConfig({ file, env: { VGPU_DEVICE__SEED: "4" } });
    expect(c).toMatchObject({
      nodeId: "from-file",
      device: { seed: 4, vramBytes: 64 * 1024 ** 2 },
    });
  });

  it.each([
    [{ device: { vramBytes: -5 } }, /device\.vramBytes = -5: must be at least/],
    [{ device: { vramBytes: "lots" } }, /device\.vramBytes = "lots"/],
    [{ guest: { listen: "nohost" } }, /guest\.listen = "nohost": must be host:port/],
    [{ ops: { token: "short" } }, /ops\.token = \(hidden\): must be at least 16 characters/],
    [{ tenants: [{ name: "x", token: "abc" }] }, /tenants\.0\.token = \(hidden\)/],
    [{ limits: { maxDmaBytes: "40MiB" } }, /limits\.maxDmaBytes: must be at most half/],
    [
      {
        tenants: [
          { name: "x", token: "abcdefgh" },
          { name: "x", token: "ijklmnop" },
        ],
      },
      /tenants: tenant names must be unique/,
    ],
    [{ role: "primary", ops: { token: "a-secret-token-0001" } }, /peer\.replicationAddress/],
    [
      { role: "standby", ops: { token: "a-secret-token-0001" } },
      /peer\.name: required for a primary or standby/,
    ],
    [{ devcie: {} }, /devcie|Unrecognized key/],
    [{ log: { level: "loud" } }, /log\.level = "loud"/],
    [{ lease: { heartbeatMs: 300 } }, /lease: heartbeat 300 ms must be at most a third/],
    [{ lease: { driftMarginMs: 1 } }, /lease: drift margin 1 ms is below 10 ms/],
    [{ guest: { tls: "mutual" } }, /guest\.tls: guest\.tls needs the tls section/],
    [{ guest: { tls: "yes" } }, /guest\.tls = "yes"/],
    [
      { tls: { ca: "/x/ca.crt", cert: "/x/a.crt" } },
      /tls\.key = \(hidden\): Invalid input: expected string/,
    ],
    [{ tls: { ca: "", cert: "a", key: "b" } }, /tls\.ca = "": Too small/],
    [
      { tenants: [{ name: "x" }] },
      /tenants\.0\.token = \(hidden\): a tenant needs a token or a certificateName/,
    ],
    [
      { limits: { maxSessionsPerTenant: 20, maxSessionsTotal: 10 } },
      /limits\.maxSessionsPerTenant: must be at most limits\.maxSessionsTotal/,
    ],
    [{ limits: { sessionOpensPerSecond: 0 } }, /limits\.sessionOpensPerSecond = 0/],
    [
      { guest: { maxStreamsPerConnection: 100, newStreamBurstPerConnection: 50 } },
      /guest\.newStreamBurstPerConnection: must be at least guest\.maxStreamsPerConnection/,
    ],
    [{ guest: { openTimeoutMs: 5 } }, /guest\.openTimeoutMs = 5/],
    [
      { guest: { maxIncompleteBytesPerSource: "32MiB" } },
      /guest\.maxIncompleteBytesPerSource: must be at least guest\.maxMessageBytes/,
    ],
    [
      { guest: { maxIncompleteBytesTotal: "256MiB" } },
      /guest\.maxIncompleteBytesTotal: must be at least guest\.maxIncompleteBytesPerSource/,
    ],
    [
      {
        guest: {
          maxMessageBytes: "1MiB",
          maxIncompleteBytesPerSource: "1MiB",
          maxIncompleteBytesBeforeOpen: "2MiB",
        },
      },
      /guest\.maxIncompleteBytesBeforeOpen: must be at most guest\.maxIncompleteBytesPerSource/,
    ],
    [
      { guest: { maxIncompleteBytesBeforeOpen: 1000 } },
      /guest\.maxIncompleteBytesBeforeOpen = 1000/,
    ],
    // Checked at start, not found at bind (#12).
    [
      { guest: { listen: "127.0.0.1:65536" } },
      /guest\.listen = "127\.0\.0\.1:65536": port must be 0 to 65535/,
    ],
    [
      { ops: { listen: "127.0.0.1:7400" } },
      /ops\.listen: "127\.0\.0\.1:7400" is also guest\.listen/,
    ],
    [
      { role: "standby", guest: { listen: "0.0.0.0:7500" } },
      /replication\.listen: "127\.0\.0\.1:7500" is also guest\.listen/,
    ],
    [
      { nodeId: "host-a", peer: { name: "host-a" } },
      /peer\.name: must not be this node's own nodeId/,
    ],
    [
      {
        tenants: [
          { name: "x", token: "same-token" },
          { name: "y", token: "same-token" },
        ],
      },
      /tenants\.1\.token = \(hidden\): the same token as tenants\.0/,
    ],
  ])("refuses %j", (input, message) => {
    expect(() => parseConfig(input)).toThrow(ConfigError);
    expect(() => parseConfig(input)).toThrow(message);
  });

  it("takes listeners on port 0 (any free port), and a standalone node's unused replication port", () => {
    const anyPort = { listen: "127.0.0.1:0" };
    expect(() => parseConfig({ guest: anyPort, ops: anyPort, replication: anyPort })).not.toThrow();
    expect(() => parseConfig({ guest: { listen: "127.0.0.1:7500" } })).not.toThrow();
  });

  it("names an unknown VGPU_* variable, and leaves vgpuctl's variables alone", () => {
    const env = {
      VGPU_NODES: "http://127.0.0.1:9400",
      VGPU_TOKEN: "an-admin-token-0001",
      VGPU_LOG_LEVEL: "debug",
      VGPU_DEVICE__VRAMM: "1GiB",
    };
    const refusal = () => loadConfig({ env });
    expect(refusal).toThrow(ConfigError);
    expect(refusal).toThrow(
      /^config: VGPU_LOG_LEVEL: unknown variable \(vgpud has no field logLevel\)$/m,
    );
    expect(refusal).toThrow(
      /^config: VGPU_DEVICE__VRAMM: unknown variable \(vgpud has no field device\.vramm\)$/m,
    );
    expect(refusal).not.toThrow(/NODES|TOKEN|nodes|token/);
    expect(loadConfig({ env: { VGPU_NODES: "x", VGPU_TOKEN: "y" } }).nodeId).toBe("node-a");
  });

  it("takes a tenant known by its certificate alone, and the tls files", () => {
    const c = parseConfig({
      tls: { ca: "/etc/vgpu-ha/tls/ca.crt", cert: "/etc/a.crt", key: "/etc/a.key" },
      guest: { tls: "mutual" },
      tenants: [{ name: "x", certificateName: "guest-x" }],
    });
    expect(c.tenants[0]).toMatchObject({
      name: "x",
      certificateName: "guest-x",
      contextQuota: 4096,
    });
    expect(c.tenants[0]!.token).toBeUndefined();
    expect(c.tls?.ca).toBe("/etc/vgpu-ha/tls/ca.crt");
  });

  it("never prints a secret in an error or in the printed config", () => {
    const secret = "a-secret-token-0001";
    const bad = () => parseConfig({ role: "primary", ops: { token: secret }, nope: 1 });
    expect(bad).toThrow(ConfigError);
    expect(bad).not.toThrow(new RegExp(secret));
    const printed = JSON.stringify(redactConfig(parseConfig({ ops: { token: secret } })));
    expect(printed).not.toContain(secret);
    expect(printed).not.toContain("demo-token");
  });

  it("names a missing or unparsable file", () => {
    expect(() => loadConfig({ file: "/nonexistent/vgpu.yaml" })).toThrow(
      /\/nonexistent\/vgpu\.yaml/,
    );
    const dir = mkdtempSync(join(tmpdir(), "vgpu-cfg-"));
    writeFileSync(join(dir, "bad.json"), "{ nope");
    expect(() => loadConfig({ file: join(dir, "bad.json") })).toThrow(/not valid JSON/);
  });
});
