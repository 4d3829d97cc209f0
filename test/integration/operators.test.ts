// Proves the operator features against a real pair, driven by the built vgpuctl: /v1/status of
// a primary, a standby and a standalone node validates against docs/status.schema.json, and
// both nodes of a streaming pair show the same lineage, kept through a takeover and a resync;
// maintenance mode reaches the standby on the primary's heartbeats and stops it from taking
// over when the primary is killed, until resumed; the role history of both nodes is merged
// (who asked, why, epochs); reinit makes a standby take a fresh snapshot; and no log line of
// either node repeats a key.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { afterEach, describe, expect, it } from "vitest";
import { ADMIN, FailoverPair } from "../support/failover-pair.js";
import { duplicateTopLevelKeys } from "../support/json-keys.js";
import { metrics, type NodeStatus, sleep, status, waitFor } from "../support/ops-client.js";
import { startNode } from "../support/temp-node.js";

const BIN = "packages/client/dist/vgpuctl/main.js";
const LEASE_MS = 1000;

const ajv = new Ajv2020({ allErrors: true });
addFormats.default(ajv);
const validate = ajv.compile(JSON.parse(readFileSync("docs/status.schema.json", "utf8")));

function expectValidStatus(s: unknown): void {
  const ok = validate(s);
  expect(ok ? [] : validate.errors, JSON.stringify(s)).toEqual([]);
}

let pair: FailoverPair | undefined;
let cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await pair?.cleanup();
  pair = undefined;
  for (const c of cleanups) await c();
  cleanups = [];
});

function vgpuctl(...args: string[]) {
  const env = { ...process.env };
  delete env.VGPU_NODES;
  delete env.VGPU_TOKEN;
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", timeout: 60_000, env });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const roleOf = async (p: FailoverPair, n: "a" | "b") => (await status(p.node(n))).role;
const streaming = (s: NodeStatus) => s.replication?.state === "streaming";

describe("operators", () => {
  it("status matches its schema on a standalone node", async () => {
    const { node, cleanup } = await startNode();
    cleanups.push(cleanup);
    expectValidStatus(await status(node));
  });

  it("pause holds the takeover, resume releases it; history, reinit, schema and log keys", async () => {
    pair = await FailoverPair.create({ lease: { durationMs: LEASE_MS, heartbeatMs: 100 } });
    const p = pair;
    await waitFor("a streaming", async () => streaming(await status(p.node("a"))), {
      timeoutMs: 20_000,
    });
    const first = { a: await status(p.node("a")), b: await status(p.node("b")) };
    expectValidStatus(first.a);
    expectValidStatus(first.b);
    // One history: the standby's replica (its snapshot) carries the primary's lineage.
    const lineage = first.a.lineage;
    expect(lineage).toMatch(/^[0-9a-f-]{36}$/);
    expect(first.b.lineage).toBe(lineage);
    const both = ["--node", p.node("a").ops, "--node", p.node("b").ops, "--token", ADMIN];

    const paused = vgpuctl(...both, "pause");
    expect(paused.code, paused.err).toBe(0);
    expect(paused.out).toMatch(/maintenance mode on a, b/);
    const b = await status(p.node("b"));
    expect(b.maintenance).toMatchObject({ paused: true, by: "primary" });
    expect((await metrics(p.node("b"))).get("vgpu_maintenance_paused")).toBe(1);
    expect(vgpuctl(...both, "status").out).toMatch(/a: MAINTENANCE: paused/);

    // The primary dies while paused: the standby does not take over on its own.
    const bOps = p.node("b");
    process.kill(p.node("a").pid, "SIGKILL");
    await p.node("a").exited;
    await sleep(LEASE_MS * 4);
    expect(await roleOf(p, "b")).toBe("standby");
    const onB = ["--node", bOps.ops, "--token", ADMIN];
    const resumed = vgpuctl(...onB, "resume");
    expect(resumed.code, resumed.err).toBe(0);
    await waitFor("b primary after resume", async () => (await roleOf(p, "b")) === "primary");

    // a comes back as b's standby (a snapshot), then is told to take a fresh one.
    await p.start("a");
    await waitFor("b streaming to a", async () => streaming(await status(p.node("b"))), {
      timeoutMs: 30_000,
    });
    const after = { a: await status(p.node("a")), b: await status(p.node("b")) };
    expectValidStatus(after.b);
    // The history went on through b's takeover, and a's snapshot of it is of the same one.
    expect(after.b.lineage).toBe(lineage);
    expect(after.a.lineage).toBe(lineage);
    // a restarted with a new ops port (the pair's configs use port 0): name both afresh.
    const nodes = ["--node", p.node("a").ops, "--node", p.node("b").ops];
    const reinit = vgpuctl(...nodes, "--token", ADMIN, "reinit", "a");
    expect(reinit.code, reinit.err + reinit.out).toBe(0);
    expect(reinit.out).toMatch(/a is a replica again at seq \d+/);
    const snapshots = (await metrics(p.node("b"))).get("vgpu_snapshots_total", {
      event: "completed",
    });
    expect(snapshots).toBeGreaterThanOrEqual(2);

    const history = JSON.parse(vgpuctl(...nodes, "--json", "history").out) as {
      node: string;
      from: string;
      to: string;
      reason: string;
      by: string;
      epoch: number;
    }[];
    const steps = history.map(
      (c) => `${c.node}:${c.from}>${c.to}:${c.reason}:${c.by.split(" ")[0]}`,
    );
    expect(steps).toContain("a:none>primary:cold_start:automatic");
    expect(steps).toContain("b:standby>primary:lease_expired:automatic");
    expect(steps).toContain("a:standby>standby:reinit:operator");
    const epochs = history.map((c) => c.epoch);
    expect([...epochs].sort((x, y) => x - y)).toEqual(epochs);
    const table = vgpuctl(...nodes, "history");
    expect(table.out).toMatch(/TIME\s+NODE\s+EPOCH\s+FROM → TO\s+REASON\s+SEQ\s+BY/);

    for (const n of p.nodes.values()) {
      for (const line of readFileSync(n.logFile, "utf8").split("\n")) {
        if (line.startsWith("{")) expect(duplicateTopLevelKeys(line), line).toEqual([]);
      }
    }
  });
});
