#!/usr/bin/env node
// `npm start`: a local primary + standby pair with a demo guest. Starts the standby (node-b)
// and the primary (node-a) on loopback (free ports chosen once: a restarted node keeps its
// guest, replication and ops ports; different device seeds), prints an `export` line for
// vgpuctl, runs the demo guest against the primary and prints what it did, checks both
// replicas are equal, then keeps a light load running and prints a one-line status per node
// until Ctrl-C, which stops everything and keeps the logs (it prints where).
//   --once   run the demo and the check, stop both nodes and exit (0 when all checked out;
//            the logs are removed then, and kept when something failed)
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { buf, runDemo, Session, u32 } from "@vgpu-ha/client";
import { pairConfigs } from "../process/pair-config.js";
import { type SpawnedNode, spawnVgpud } from "../process/spawn-node.js";

const TENANT = { tenant: "demo", token: "demo-token" };
const ADMIN_TOKEN = "local-demo-admin-token";

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { once: { type: "boolean" } } });
  const dir = mkdtempSync(join(tmpdir(), "vgpu-local-"));
  const configs = new Map<string, Record<string, unknown>>();
  const nodes = new Map<string, SpawnedNode>();
  let stopping = false;
  // Ctrl-C reaches the whole process group: the nodes may exit before the demo guest stops.
  // From the signal on, an exit is the stop, not a crash to restart.
  const markStopping = () => {
    stopping = true;
  };
  process.once("SIGINT", markStopping);
  process.once("SIGTERM", markStopping);
  let generation = 0;
  /** Starts a node; if it dies while we run, starts it again a second later (like systemd). */
  const starting = new Set<Promise<SpawnedNode>>();
  const start = async (name: string): Promise<SpawnedNode> => {
    const spawning = spawnVgpud({
      dir,
      name: `${name}.${generation++}`,
      config: configs.get(name)!,
    });
    starting.add(spawning);
    const n = await spawning.finally(() => starting.delete(spawning));
    if (stopping) {
      // Ctrl-C came while this (re)start was under way: do not leave it running.
      await n.stop();
      return n;
    }
    nodes.set(name, n);
    void n.exited.then((code) => {
      if (stopping || nodes.get(name) !== n) return;
      console.log(`${name} exited (${code}); restarting it in 1 s, as systemd would`);
      setTimeout(() => {
        if (stopping) return;
        start(name).then(
          (m) =>
            console.log(`${name} restarted: pid ${m.pid}  ops ${m.ops}/v1/status (same ports)`),
          (e: Error) => console.log(`${name} failed to restart: ${e.message}`),
        );
      }, 1000);
    });
    return n;
  };
  /** Stops both nodes; keeps their logs and state unless told to remove them. */
  const cleanup = async (keepLogs: boolean) => {
    stopping = true;
    await Promise.allSettled([...starting]);
    await Promise.all([...nodes.values()].map((n) => n.stop()));
    if (!keepLogs) {
      rmSync(dir, { recursive: true, force: true });
      return;
    }
    const logs = readdirSync(dir).filter((f) => f.endsWith(".log"));
    console.log(`\nboth nodes stopped; logs kept in ${dir}: ${logs.sort().join(", ")}`);
    console.log(`(state directories too; remove them all with: rm -r ${dir})`);
  };
  try {
    const [a, b] = await pairConfigs({
      names: ["node-a", "node-b"],
      dir,
      clusterId: "vgpu-local",
      common: {
        ops: { token: ADMIN_TOKEN },
        device: { vramBytes: "1GiB" },
        tenants: [{ name: TENANT.tenant, token: TENANT.token, vramQuotaBytes: "512MiB" }],
      },
    });
    configs.set("node-a", a);
    configs.set("node-b", b);
    const standby = await start("node-b");
    const primary = await start("node-a");
    for (const [name, n, role] of [
      ["node-a", primary, "primary"],
      ["node-b", standby, "standby"],
    ] as const) {
      console.log(
        `${name} (${role}) pid ${n.pid}  guest ${n.guest}  ops ${n.ops}/v1/status  log ${n.logFile}`,
      );
    }
    console.log(
      `\nfor vgpuctl (the ports stay the same when a node restarts):\n  export VGPUCTL_NODES=${primary.ops},${standby.ops} VGPUCTL_TOKEN=${ADMIN_TOKEN}\n  npx vgpuctl status`,
    );
    await waitStreaming(primary);
    const session = await Session.open({ endpoints: [primary.guest, standby.guest], ...TENANT });
    console.log(
      `\ndemo guest: session ${session.id} on node-a (epoch ${session.epoch}), mode sync`,
    );
    const ok = await runDemo(session, (s) =>
      console.log(`  ${s.ok ? "✓" : "✗"} ${s.what.padEnd(28)} ${s.detail}`),
    );
    const verify = await verifyPair(primary);
    console.log(
      `  ${verify.equal ? "✓" : "✗"} ${"replicas equal".padEnd(28)} digest ${verify.primary.slice(0, 16)}… at seq ${verify.seq} on both nodes`,
    );
    const allOk = ok && verify.equal;
    console.log(allOk ? "\ndemo: every result checked out" : "\ndemo: SOMETHING WAS WRONG");
    if (values.once) {
      await session.close();
      await cleanup(!allOk);
      return allOk ? 0 : 1;
    }
    console.log("running a light load; Ctrl-C stops both nodes and the guest");
    console.log(`try failover: kill -9 ${primary.pid}   (node-a, the primary)\n`);
    await keepRunning(session, nodes);
    await cleanup(true);
    return 0;
  } catch (e) {
    console.error(`vgpu-local: ${(e as Error).message}`);
    await cleanup(true);
    return 1;
  }
}

async function getJson(url: string, init?: RequestInit): Promise<Record<string, unknown>> {
  return (await (await fetch(url, init)).json()) as Record<string, unknown>;
}

async function waitStreaming(primary: SpawnedNode): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const s = await getJson(`${primary.ops}/v1/status`);
    if ((s.replication as { state?: string } | null)?.state === "streaming") return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("the standby did not connect within 10 s");
}

async function verifyPair(primary: SpawnedNode) {
  const v = await getJson(`${primary.ops}/v1/verify`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  // On a loaded machine the pair may have failed over during the demo: say so, do not crash.
  if (typeof v.primary !== "string") throw new Error(`verify: ${String(v.message ?? v.error)}`);
  return v as { equal: boolean; seq: number; primary: string; standby: string };
}

/** Increments a counter buffer in a loop and prints each node's status until a signal. */
async function keepRunning(session: Session, nodes: Map<string, SpawnedNode>): Promise<void> {
  const ctx = await session.createContext();
  const bo = await session.allocBo(ctx, 4096);
  let stop = false;
  const stopped = new Promise<void>((resolve) => {
    const onSignal = () => {
      stop = true;
      resolve();
    };
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
  });
  let frames = 0;
  const load = (async () => {
    while (!stop) {
      await session.launch(ctx, "increment_u32", [buf(bo), u32(1024), u32(1)]);
      frames++;
      await new Promise((r) => setTimeout(r, 5));
    }
  })().catch((e: Error) => console.log(`demo guest stopped: ${e.message}`));
  const timer = setInterval(async () => {
    const rate = (frames / 2).toFixed(0);
    frames = 0;
    for (const [name, node] of [...nodes].sort()) {
      try {
        const s = await getJson(`${node.ops}/v1/status`);
        const seq = s.seq as { last: number; applied: number; acknowledged: number };
        const rep = s.replication as { state?: string; lag?: { entries: number } } | null;
        console.log(
          `${name}  role=${s.role} epoch=${s.epoch} state=${rep?.state ?? "-"} last=${seq.last} ` +
            `applied=${seq.applied} lag=${rep?.lag?.entries ?? 0}` +
            (s.role === "primary" ? ` frames/s=${rate}${s.degraded ? " DEGRADED" : ""}` : ""),
        );
      } catch (e) {
        console.log(`${name}  unreachable: ${(e as Error).message}`);
      }
    }
  }, 2000);
  await stopped;
  clearInterval(timer);
  // Ctrl-C reaches the nodes too: a call to a node that is gone would wait for it forever.
  const atMostASecond = (p: Promise<unknown>) =>
    Promise.race([p, new Promise((r) => setTimeout(r, 1000))]);
  await atMostASecond(load);
  await atMostASecond(session.close().catch(() => undefined));
}

main().then((code) => process.exit(code));
