// npm run hostile -- [options]: the attack harness of issue 12. Without --target it starts its
// own pair (network namespaces when root, else loopback) and, under a normal guest's load, runs
// each chosen attack in turn (the stray hellos a second time against a pair with mutual TLS),
// judging each (execute.ts); a pair that lost its primary or its state is replaced before the
// next attack. With --target it aims one attack at a pair an operator runs. Writes
// report.json and report.md; exit 0 when every attack held, 1 when a check failed, 2 for bad
// options, 3 when the harness could not run, 130/143 when interrupted. Whatever happens it
// removes its namespaces, routes and processes.
import { resolve } from "node:path";
import { Cleanup } from "../chaos/cleanup.js";
import {
  createLoopbackHosts,
  createNetnsHosts,
  type Hosts,
  netnsAvailable,
  sweepStaleRuns,
} from "../chaos/hosts.js";
import { type AttackContext, allAttacks, type PairNode } from "./catalogue.js";
import { type AttackResult, execute } from "./execute.js";
import { type HostileOptions, parseOptions, type TargetOptions, UsageError } from "./options.js";
import { CLUSTER_ID, OwnPair, routeToReplication } from "./own-pair.js";
import {
  CROWD_TENANT,
  idleSecondsSupported,
  MALLORY_TENANT,
  NORMAL_TENANT,
  SESSION_IDLE_SECONDS,
} from "./pair-config.js";
import { contextFor, waitHealthy } from "./pair-view.js";
import { writeReport } from "./report.js";

const t0 = performance.now();
const now = () => performance.now() - t0;
const log = (msg: string) => console.log(`[${(now() / 1000).toFixed(1).padStart(6)} s] ${msg}`);

function summary(r: AttackResult): string {
  const ratio = r.guestRatio === null ? "-" : r.guestRatio.toFixed(2);
  const verdict = r.failures.length === 0 ? "held" : `FAILED: ${r.failures.join("; ")}`;
  return `${r.name}: epochs ${r.epochChanges}, guest ratio ${ratio}, lost ${r.lostAcked ?? "-"}, peak RSS ${r.peakRssMb?.toFixed(0) ?? "-"} MiB, refusals ${r.refusalsCounted ?? "-"} — ${verdict}`;
}

async function main(): Promise<number> {
  let o: HostileOptions | "help";
  try {
    o = parseOptions(process.argv.slice(2));
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`hostile: ${e.message}`);
      return 2;
    }
    throw e;
  }
  if (o === "help") return 0;
  const cleanup = new Cleanup();
  cleanup.onSignals(() => undefined);
  const out = resolve(o.out);
  try {
    const results = o.target
      ? [await againstTarget(o, o.target)]
      : await againstOwnPair(o, out, cleanup);
    const failed = results.filter((r) => r.failures.length > 0);
    log(`report: ${out}/report.md — ${results.length} attacks, ${failed.length} failed`);
    return failed.length === 0 ? 0 : 1;
  } catch (e) {
    console.error(`hostile: ${(e as Error).stack ?? e}`);
    return 3;
  } finally {
    await cleanup.run();
    for (const e of cleanup.errors) console.error(`cleanup: ${e}`);
  }

  async function againstOwnPair(
    o: HostileOptions,
    out: string,
    cleanup: Cleanup,
  ): Promise<AttackResult[]> {
    const stale = sweepStaleRuns();
    if (stale.length > 0) log(`removed leftovers of earlier runs: ${stale.join(", ")}`);
    const netns = netnsAvailable();
    const hosts: Hosts =
      !o.loopback && netns.ok
        ? await createNetnsHosts(cleanup)
        : await createLoopbackHosts(cleanup);
    await routeToReplication(hosts, cleanup);
    const hostsLine =
      o.loopback || netns.ok ? hosts.describe : `${hosts.describe} (no namespaces: ${netns.why})`;
    log(`hosts: ${hostsLine}`);
    const idle = idleSecondsSupported();
    const notes = [
      idle === undefined
        ? "This vgpud's config has no guest.sessionIdleSeconds: abandoned sessions are never reaped."
        : `The pair runs with guest.sessionIdleSeconds ${SESSION_IDLE_SECONDS}.`,
      "The attackers and the normal guest share this machine with the nodes; on two real hosts the ratios would be higher.",
    ];
    const chosen = new Set(o.attacks);
    const defs = allAttacks().filter((d) => chosen.has(d.name));
    const results: AttackResult[] = [];
    const startedAt = new Date().toISOString();
    const save = () =>
      writeReport(out, { startedAt, hosts: hostsLine, scale: o.scale, notes, attacks: results });
    let pairIndex = 0;
    for (const tls of [false, true]) {
      const round = defs.filter((d) => d.tls === tls);
      if (round.length === 0) continue;
      let pair: OwnPair | undefined;
      const fresh = async () => {
        await pair?.stop();
        const dir = `${out}/pair-${pairIndex++}`;
        pair = await OwnPair.start({ hosts, dir, tls, cleanup, log, now });
        log(`pair ${dir} healthy${tls ? " (mutual TLS)" : ""}`);
        return pair;
      };
      pair = await fresh();
      for (const [i, def] of round.entries()) {
        try {
          await waitHealthy(pair.nodes(), 30_000);
        } catch (e) {
          log(`${(e as Error).message}: starting a fresh pair`);
          pair = await fresh();
        }
        log(`${def.name}: attacking the ${def.at}'s ${def.port} port`);
        const p = pair;
        const ctx = await contextFor(def, p.nodes(), {
          scale: o.scale,
          clusterId: CLUSTER_ID,
          ...(p.attackerTls ? { attackerTls: p.attackerTls } : {}),
        });
        const result = await execute(def, ctx, {
          nodes: p.nodes(),
          guest: { endpoints: p.endpoints, ...tenantOf(NORMAL_TENANT) },
          beforeMs: o.scale === "full" ? 3000 : 1000,
          seed: o.seed + results.length * 7919,
        });
        results.push(result);
        log(summary(result));
        save();
        // A pair that changed epochs is not the pair the next attack should meet.
        if (result.epochChanges > 0 && i < round.length - 1) pair = await fresh();
      }
      await pair?.stop();
    }
    save();
    return results;
  }
}

const tenantOf = (t: { name: string; token: string }) => ({ tenant: t.name, token: t.token });

/** One attack at an operator's pair; watched through --ops when given. */
async function againstTarget(o: HostileOptions, t: TargetOptions): Promise<AttackResult> {
  const def = allAttacks().find((d) => d.name === o.attacks[0])!;
  const opsOf = (i: number) =>
    t.ops[i] ?? (def.port === "ops" && i === 0 ? `http://${t.target}` : "");
  const node: PairNode = {
    id: t.nodeId,
    peerName: t.peerName,
    guest: t.target,
    replication: t.target,
    opsUrl: opsOf(0),
  };
  const other: PairNode = {
    id: t.peerName,
    peerName: t.nodeId,
    guest: t.peerTarget ?? t.target,
    replication: t.peerTarget ?? t.target,
    opsUrl: opsOf(1),
  };
  let epoch = 1;
  if (node.opsUrl) {
    const s = (await (await fetch(`${node.opsUrl}/v1/status`)).json()) as { epoch: number };
    epoch = s.epoch;
  }
  const ctx: AttackContext = {
    scale: o.scale,
    clusterId: t.clusterId,
    adminToken: t.adminToken ?? "",
    node,
    other,
    epoch,
    sessionTenant: t.tenant ?? CROWD_TENANT,
    hostileTenant: t.tenant ?? MALLORY_TENANT,
    sessionIdleSeconds: undefined,
    ...(t.tls ? { attackerTls: () => t.tls! } : {}),
  };
  if (def.name === "crossed-pair" && !t.peerTarget) {
    throw new UsageError("crossed-pair needs --peer-target (the other node's replication address)");
  }
  log(
    `${def.name} at ${t.target}${node.opsUrl ? `, watching ${node.opsUrl}` : " (no --ops: nothing watched)"}`,
  );
  const watched = [node, other].filter((n) => n.opsUrl !== "");
  const result = await execute(def, ctx, { nodes: watched, beforeMs: 0, seed: o.seed });
  log(summary(result));
  writeReport(resolve(o.out), {
    startedAt: new Date().toISOString(),
    hosts: `target ${t.target}`,
    scale: o.scale,
    notes: ["Against an operator's pair: no normal guest ran; the figures are the watched nodes'."],
    attacks: [result],
  });
  return result;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e);
    process.exit(3);
  },
);
