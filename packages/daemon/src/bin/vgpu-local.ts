#!/usr/bin/env node
// `npm start`: a local node with a demo guest. Starts vgpud (loopback, any free ports), runs
// the demo guest against it and prints what it did, then keeps a light load running and
// prints a one-line status until Ctrl-C, which stops everything.
//   --once   run the demo, stop the node and exit (0 when every demo step checked out)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { buf, runDemo, Session, u32 } from "@vgpu-ha/client";
import { type SpawnedNode, spawnVgpud } from "../process/spawn-node.js";

const TENANT = { tenant: "demo", token: "demo-token" };

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { once: { type: "boolean" } } });
  const dir = mkdtempSync(join(tmpdir(), "vgpu-local-"));
  let node: SpawnedNode | undefined;
  const cleanup = async () => {
    await node?.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    node = await spawnVgpud({
      dir,
      name: "node-a",
      config: {
        nodeId: "node-a",
        guest: { listen: "127.0.0.1:0" },
        ops: { listen: "127.0.0.1:0" },
        device: { seed: 1, vramBytes: "1GiB" },
        tenants: [{ name: TENANT.tenant, token: TENANT.token, vramQuotaBytes: "512MiB" }],
      },
    });
    console.log(`vgpud node-a serving guests on ${node.guest}`);
    console.log(`  ops:  ${node.ops}/v1/status  ${node.ops}/metrics  ${node.ops}/readyz`);
    console.log(`  log:  ${node.logFile}\n`);
    const session = await Session.open({ endpoint: node.guest, ...TENANT });
    console.log(`demo guest: session ${session.id} (epoch ${session.epoch})`);
    const ok = await runDemo(session, (s) =>
      console.log(`  ${s.ok ? "✓" : "✗"} ${s.what.padEnd(28)} ${s.detail}`),
    );
    console.log(ok ? "\ndemo: every result checked out" : "\ndemo: SOME RESULTS WERE WRONG");
    if (values.once) {
      await session.close();
      await cleanup();
      return ok ? 0 : 1;
    }
    console.log("running a light load; Ctrl-C stops the node and the guest\n");
    await keepRunning(session, node);
    await cleanup();
    return 0;
  } catch (e) {
    console.error(`vgpu-local: ${(e as Error).message}`);
    await cleanup();
    return 1;
  }
}

/** Increments a counter buffer in a loop and prints the node's status until a signal. */
async function keepRunning(session: Session, node: SpawnedNode): Promise<void> {
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
  })().catch(() => undefined);
  const timer = setInterval(async () => {
    try {
      const s = (await (await fetch(`${node.ops}/v1/status`)).json()) as Record<string, unknown>;
      const vram = s.vram as { usedBytes: number };
      console.log(
        `node-a  role=${s.role} epoch=${s.epoch} sessions=${s.sessions} contexts=${s.contexts} ` +
          `vram=${(vram.usedBytes / 2 ** 20).toFixed(1)}MiB frames/s=${(frames / 2).toFixed(0)}`,
      );
      frames = 0;
    } catch (e) {
      console.log(`node-a  unreachable: ${(e as Error).message}`);
    }
  }, 2000);
  await stopped;
  clearInterval(timer);
  await load;
  await session.close().catch(() => undefined);
}

main().then((code) => process.exit(code));
