// Proves mutual TLS between the nodes and TLS on the guest port with real processes and
// certificates made by deploy/examples/make-certs.sh: a TLS pair replicates and its replicas
// are equal, and a standby started late pulls its snapshot over mutual TLS, a pull cut part
// way being reopened where it stopped; a primary that is plaintext, has a certificate from another CA, or a certificate
// naming someone other than the standby's peer.name is refused by the standby, which logs and
// counts each refusal (vgpu_tls_refusals_total); a primary refuses a standby whose certificate
// does not name its peer.name. On the guest port: a tenant known by its client certificate
// opens without a token, a token tenant opens over TLS, a certificate naming another tenant
// or none at all (guest.tls mutual) gets nowhere.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buf, ErrorCode, Session, SessionClosedError, u32 } from "@vgpu-ha/client";
import { VGPUD_BIN } from "@vgpu-ha/daemon";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CertFiles, makeCerts } from "../support/certs.js";
import { metrics, status, waitFor } from "../support/ops-client.js";
import { GUESTS, ReplicationPair } from "../support/replication-pair.js";
import { startNode } from "../support/temp-node.js";

let dir: string;
let good: Record<string, CertFiles>;
let foreign: Record<string, CertFiles>;
const pairs: ReplicationPair[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "vgpu-tls-"));
  good = makeCerts(join(dir, "ca"), "node-p", "node-s", "intruder", "guest-alpha", "guest-beta");
  foreign = makeCerts(join(dir, "other-ca"), "node-p");
});

afterAll(async () => {
  await Promise.all(pairs.map((p) => p.stop()));
  rmSync(dir, { recursive: true, force: true });
});

/**
 * A pair whose standby expects a primary named node-p, and whose primary a standby node-s. A
 * node given the intruder's certificate is named intruder (a node's certificate must name it).
 */
async function pair(primaryTls: CertFiles | undefined, standbyTls: CertFiles | undefined) {
  const named = (files: CertFiles | undefined) =>
    files === good.intruder ? { nodeId: "intruder" } : {};
  const p = await ReplicationPair.start({
    primary: primaryTls ? { tls: primaryTls, ...named(primaryTls) } : {},
    standby: {
      peer: { name: "node-p" },
      ...(standbyTls ? { tls: standbyTls, ...named(standbyTls) } : {}),
    },
  });
  pairs.push(p);
  return p;
}

const tlsRefusals = async (node: Parameters<typeof metrics>[0], reason: string) =>
  (await metrics(node)).get("vgpu_tls_refusals_total", { port: "replication", reason });

const logOf = (node: { logFile: string }) => readFileSync(node.logFile, "utf8");

describe("mutual TLS between the nodes", () => {
  it("a pair with certificates of one CA, naming each other, replicates", async () => {
    const p = await pair(good["node-p"], good["node-s"]);
    const s = await Session.open({ endpoint: p.primary.guest, ...GUESTS.bulk });
    const ctx = await s.createContext();
    const bo = await s.allocBo(ctx, 4096);
    await s.dmaWrite(ctx, bo, 0, Uint8Array.of(1, 2, 3));
    await s.close();
    await p.waitInSync();
    expect(await p.verify()).toMatchObject({ equal: true });
    expect(await tlsRefusals(p.liveStandby, "handshake")).toBe(0);
  });

  it("a late standby pulls its snapshot over TLS; a pull cut part way goes on where it stopped", async () => {
    const p = await ReplicationPair.start({
      proxy: true,
      startStandby: false,
      primary: { tls: good["node-p"] },
      standby: { peer: { name: "node-p" }, tls: good["node-s"] },
      shared: { device: { vramBytes: "128MiB" } },
    });
    pairs.push(p);
    const s = await Session.open({ endpoint: p.primary.guest, ...GUESTS.bulk });
    const ctx = await s.createContext();
    const bo = await s.allocBo(ctx, 64 * 1024 * 1024);
    // Every word non-zero: no page of the snapshot is skipped.
    await s.launch(ctx, "fill", [buf(bo), u32(16 * 1024 * 1024), u32(0x01020304)]);
    const standby = await p.startStandby();
    await waitFor(
      "the standby part way through its pulled snapshot",
      async () => {
        const r = (await status(standby)).replication!;
        return r.state === "snapshot" && (r.snapshot?.chunks ?? 0) > 1 ? true : undefined;
      },
      { intervalMs: 5 },
    );
    p.pullProxy.breakAll();
    await p.waitInSync();
    await s.close();
    const r = (await status(standby)).replication!;
    expect(r.snapshotPulls).toBeGreaterThanOrEqual(2);
    expect(r.snapshotPulledBytes!.inPlace).toBeGreaterThan(0); // read in place over TLS too
    expect(r.snapshotPulledBytes!.copied).toBe(0);
    // Opened over the pages socket (routed by ALPN on the replication port), not PullSnapshot.
    const overSocket = (l: string) =>
      l.includes("snapshot pull opened") && l.includes('"remote":"pages:');
    expect(logOf(p.primary).split("\n").some(overSocket)).toBe(true);
    const m = await metrics(p.primary);
    expect(m.get("vgpu_snapshots_total", { event: "started" })).toBe(1);
    expect(m.get("vgpu_snapshots_total", { event: "completed" })).toBe(1);
    expect(await p.verify()).toMatchObject({ equal: true });
    expect(await tlsRefusals(standby, "handshake")).toBe(0);
  });

  it.each([
    ["a plaintext primary", undefined, "handshake"],
    ["a primary with another CA's certificate", "foreign", "handshake"],
    ["a primary whose certificate names someone else", "intruder", "identity"],
  ] as const)("the standby refuses %s, and logs and counts it", async (_, which, reason) => {
    const primaryTls =
      which === "foreign" ? foreign["node-p"] : which === "intruder" ? good.intruder : undefined;
    const p = await pair(primaryTls, good["node-s"]);
    const standby = p.liveStandby;
    await waitFor(`a ${reason} refusal`, async () => (await tlsRefusals(standby, reason)) >= 2);
    expect(logOf(standby)).toMatch(
      /"port":"replication","reason":"\w+".*"msg":"refused a connection on the replication port"/,
    );
    expect(logOf(standby)).toContain(`"reason":"${reason}"`);
    const [ps, ss] = await Promise.all([status(p.primary), status(standby)]);
    expect(ps.replication?.state).not.toBe("streaming");
    expect(ss.replication?.state).toBe("empty");
    expect(logOf(standby)).not.toContain("primary connected");
  });

  it("a primary refuses a standby whose certificate does not name its peer.name", async () => {
    const p = await pair(good["node-p"], good.intruder);
    await waitFor(
      "the primary's refusal",
      () =>
        /peer certificate names intruder, not node-s.*"msg":"replication: cannot reach the standby"/.test(
          logOf(p.primary),
        ),
      { timeoutMs: 10_000 },
    ).catch((e: Error) => {
      throw new Error(`${e.message}; primary log:\n${logOf(p.primary).slice(-3000)}`);
    });
    expect((await status(p.primary)).replication?.state).not.toBe("streaming");
    // Said once, not once per redial.
    expect(logOf(p.primary).match(/cannot reach the standby/g)?.length).toBe(1);
  });
});

describe("tls files", () => {
  it("a node whose tls files are wrong does not start: exit 2, a line naming the field", () => {
    const config = join(dir, "bad-tls.json");
    const missing = join(dir, "nope.crt");
    writeFileSync(config, JSON.stringify({ tls: { ...good["node-s"], cert: missing } }));
    const run = spawnSync(process.execPath, [VGPUD_BIN, "--config", config], { encoding: "utf8" });
    expect(run.status).toBe(2);
    expect(run.stderr.trim()).toBe(
      `config: tls.cert = ${JSON.stringify(missing)}: cannot read: ENOENT`,
    );
    writeFileSync(config, JSON.stringify({ tls: { ...good["node-s"], key: good["node-p"]!.key } }));
    const wrongKey = spawnSync(process.execPath, [VGPUD_BIN, "--config", config], {
      encoding: "utf8",
    });
    expect(wrongKey.status).toBe(2);
    expect(wrongKey.stderr).toMatch(
      /^config: tls\.key = .*node-p\.key": not the key of the certificate/,
    );
  });
});

describe("TLS on the guest port", () => {
  const ALPHA = { name: "alpha", certificateName: "guest-alpha" };
  const BETA = { name: "beta", token: "beta-token-00002" };

  it("takes a tenant by its client certificate and a token tenant over TLS; refuses the rest", async () => {
    const node = await startNode({
      nodeId: "node-s",
      tls: good["node-s"],
      guest: { listen: "127.0.0.1:0", tls: "mutual" },
      tenants: [ALPHA, BETA],
    });
    try {
      const ca = readFileSync(good["node-s"]!.ca);
      const withCert = (name: string) => ({
        ca,
        cert: readFileSync(good[name]!.cert),
        key: readFileSync(good[name]!.key),
        serverName: "node-s",
      });
      const endpoint = node.node.guest;
      const a = await Session.open({
        endpoint,
        tenant: "alpha",
        token: "",
        tls: withCert("guest-alpha"),
      });
      expect(await a.createContext()).toBeGreaterThan(0);
      await a.close();
      const b = await Session.open({
        endpoint,
        tenant: "beta",
        token: BETA.token,
        tls: withCert("guest-beta"),
      });
      await b.close();
      // guest-beta's certificate does not name alpha: exactly an unknown tenant's answer.
      const wrong = Session.open({
        endpoint,
        tenant: "alpha",
        token: "",
        tls: withCert("guest-beta"),
      });
      await expect(wrong).rejects.toMatchObject({ code: ErrorCode.UNAUTHENTICATED });
      // No client certificate (mutual): the handshake is refused, counted on the guest port.
      const none = Session.open({
        endpoint,
        tenant: "beta",
        token: BETA.token,
        tls: { ca, serverName: "node-s" },
        connectTimeoutMs: 2000,
      });
      await expect(none).rejects.toBeInstanceOf(SessionClosedError);
      await waitFor(
        "the guest port's refusal",
        async () =>
          (await metrics(node.node)).get("vgpu_tls_refusals_total", { port: "guest" }) >= 1,
      );
      // Plaintext to a TLS port gets nowhere either.
      const plain = Session.open({
        endpoint,
        tenant: "beta",
        token: BETA.token,
        connectTimeoutMs: 2000,
      });
      await expect(plain).rejects.toBeInstanceOf(SessionClosedError);
    } finally {
      await node.cleanup();
    }
  });
});
