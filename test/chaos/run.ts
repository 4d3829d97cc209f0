// npm run chaos -- [options]: the chaos harness of DESIGN §10. Starts a vgpud pair (network
// namespaces when root, else loopback), guest sessions recording every frame, a status monitor
// and the nemesis; after the fault phase it undoes every fault, drains the guests, reads the
// final state and checks it against a reference replay (checker.ts). Writes report.json,
// report.md, timeline.svg and history.jsonl; exit 0 only if every check holds (1: a check
// failed, 2: bad options, 3: the harness could not run, 130/143: interrupted). Whatever
// happens it removes its namespaces, links and processes.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { type EtcdServer, startEtcd } from "../support/etcd.js";
import { findBinary } from "../support/external.js";
import { check, type FinalState, percentiles } from "./checker.js";
import { Cleanup } from "./cleanup.js";
import { ADMIN_TOKEN, Cluster, GUEST } from "./cluster.js";
import {
  createLoopbackHosts,
  createNetnsHosts,
  type Hosts,
  NODE_NAMES,
  type NodeName,
  netnsAvailable,
  peerOf,
  sweepStaleRuns,
} from "./hosts.js";
import { GuestLoad } from "./load.js";
import { Monitor } from "./monitor.js";
import {
  describePlan,
  type FaultRecord,
  firstIndexAtOrAfter,
  Nemesis,
  planFaults,
} from "./nemesis.js";
import { readNodeLogs } from "./node-logs.js";
import { type ChaosOptions, parseOptions, replayCommand, UsageError } from "./options.js";
import { probeSession } from "./probe.js";
import { backendOptionsOf, type HeldSession, replayReference } from "./reference.js";
import { faultSummaries, markdown, type Report, sessionSummaries, writeReport } from "./report.js";
import { timelineSvg } from "./timeline.js";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const t0 = performance.now();
const wallAtZero = Date.now();
const now = () => performance.now() - t0;
const log = (msg: string) => console.log(`[${(now() / 1000).toFixed(1).padStart(6)} s] ${msg}`);

class SetupError extends Error {}

async function main(): Promise<number> {
  let options: ChaosOptions | "help";
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`chaos: ${e.message}`);
      return 2;
    }
    throw e;
  }
  if (options === "help") return 0;
  const o = options;
  const cleanup = new Cleanup();
  let nemesis: Nemesis | undefined;
  let interrupted = false;
  cleanup.onSignals(() => {
    interrupted = true;
    nemesis?.stop();
  });
  process.on("unhandledRejection", (e) =>
    console.error(`unhandled rejection: ${(e as Error)?.stack ?? e}`),
  );
  const out = resolve(o.out);
  mkdirSync(out, { recursive: true });
  try {
    return await chaos(
      o,
      out,
      cleanup,
      (n) => {
        nemesis = n;
      },
      () => interrupted,
    );
  } catch (e) {
    console.error(`chaos: ${e instanceof SetupError ? e.message : ((e as Error).stack ?? e)}`);
    return 3;
  } finally {
    await cleanup.run();
    for (const e of cleanup.errors) console.error(`cleanup: ${e}`);
  }
}

async function chaos(
  o: ChaosOptions,
  out: string,
  cleanup: Cleanup,
  setNemesis: (n: Nemesis) => void,
  interrupted: () => boolean,
): Promise<number> {
  const stale = sweepStaleRuns();
  if (stale.length > 0) log(`removed leftovers of earlier runs: ${stale.join(", ")}`);
  const netns = netnsAvailable();
  const hosts: Hosts =
    !o.loopback && netns.ok ? await createNetnsHosts(cleanup) : await createLoopbackHosts(cleanup);
  const hostsLine =
    o.loopback || netns.ok ? hosts.describe : `${hosts.describe} (no namespaces: ${netns.why})`;
  let etcd: EtcdServer | undefined;
  if (o.lease === "etcd") {
    const bin = findBinary("etcd");
    if (!bin)
      throw new SetupError("--lease etcd needs the etcd binary (Debian package etcd-server)");
    etcd = await startEtcd(bin, { hosts: hosts.etcdHosts });
    log(`started etcd (pid ${etcd.process.pid})`);
    const server = etcd;
    cleanup.add({
      name: "etcd",
      run: () => server.stop(),
      sync: () => void server.process.kill("SIGKILL"),
    });
  }
  const etcdOf = (n: NodeName) =>
    etcd?.endpoints.find((e) => e.includes(`//${hosts.placement[n].etcdHost}:`)) ?? etcd?.endpoint;
  const cluster = await Cluster.create(
    {
      dir: join(out, "nodes"),
      hosts,
      mode: o.mode,
      ...(etcd ? { etcd: { a: etcdOf("a")!, b: etcdOf("b")! } } : {}),
      now,
      log,
    },
    cleanup,
  );
  // The lease that decides when the primary is replaced: the product's default peer lease, or
  // in etcd mode the etcd lease's default TTL (a pause shorter than it is no failover there).
  const leaseMs = o.lease === "etcd" ? 2000 : 500;
  const plan = planFaults(o.seed, o.faults, Math.ceil(o.durationS / 2) + 4, leaseMs);
  log(`chaos: ${replayCommand(o)}`);
  log(`hosts: ${hostsLine}`);
  if (etcd) log(`etcd: ${etcd.endpoints.join(", ")}`);
  log(`report: ${out}`);
  log(`schedule (in order, each once the pair is healthy again, until ${o.durationS} s):`);
  for (const p of plan) log(`  #${p.index} after ${p.quietMs} ms quiet: ${describePlan(p)}`);

  // Workloads are generated before the pair runs (it takes a moment of CPU).
  const load = new GuestLoad({
    endpoints: NODE_NAMES.map((n) => hosts.placement[n].guestListen),
    tenant: GUEST.tenant,
    token: GUEST.token,
    sessions: o.sessions,
    rate: o.rate,
    seed: o.seed,
    gemmSide: o.gemmSide,
    now,
  });
  // The standby first, then the primary (it finds its standby at once).
  try {
    await cluster.start("b");
    await cluster.start("a");
  } catch (e) {
    const why = (e as Error).message;
    const etcdNote =
      o.lease === "etcd"
        ? " — does this vgpud support lease.mode etcd? (the config schema of this branch may only know peer)"
        : "";
    throw new SetupError(
      `the pair did not start: ${why}${etcdNote}\n${tailOfLogs(join(out, "nodes"))}`,
    );
  }
  const monitor = new Monitor(hosts, cluster, now);
  monitor.start();
  cleanup.add({ name: "monitor", run: () => monitor.stop() });
  const healthyBy = now() + 60_000;
  while (monitor.healthyPrimary() === undefined && now() < healthyBy) await sleep(50);
  if (monitor.healthyPrimary() === undefined) {
    throw new SetupError(
      `the pair did not become healthy within 60 s\n${tailOfLogs(join(out, "nodes"))}`,
    );
  }
  log(`pair healthy: primary ${cluster.nodeId(monitor.healthyPrimary()!)}`);
  load.start();
  const nemesis = new Nemesis({
    cluster,
    hosts,
    monitor,
    acks: load.acks,
    restart: o.faults.includes("restart"),
    now,
    recoverTimeoutMs: 60_000,
    log,
  });
  setNemesis(nemesis);
  const progress = setInterval(() => {
    const p = monitor.currentPrimary();
    log(
      `acks ${load.acked}, sessions ${load.sessions.length} (${load.sessions.filter((s) => s.failure).length} failed), primary ${p ? cluster.nodeId(p) : "none"}, faults ${nemesis.records.length}`,
    );
  }, 10_000);
  cleanup.add({ name: "progress", run: () => clearInterval(progress) });
  const loadStartMs = now();
  const faultsUntilMs = loadStartMs + o.durationS * 1000;
  await sleep(1000);
  await nemesis.run(plan, faultsUntilMs);
  while (now() < faultsUntilMs && !interrupted()) await sleep(100);
  if (interrupted()) return 130;

  log("fault phase over: undoing every fault");
  const heal = await nemesis.healAll();
  log(heal.healthy ? "pair healthy" : "pair NOT healthy 60 s after the heal");
  await sleep(1000);
  log("stopping the guests");
  const { settled } = await load.stop(60_000);
  await load.readCounters();
  const final = await finalState(cluster, hosts, monitor, heal.healedMs);
  log(
    final.convergedMs === undefined
      ? "replicas did not converge"
      : `replicas converged ${(final.convergedMs / 1000).toFixed(2)} s after the heal`,
  );
  const primaryName = final.primary ? cluster.nameOf(final.primary.nodeId) : undefined;
  // Sessions whose last frames' fate the guest could not know: ask the final primary.
  const lastFrames = new Map<string, number | undefined>();
  const probeNotes: string[] = [];
  for (const s of load.sessions) {
    const unsure = s.failure !== undefined || s.frames.some((f) => f.outcome !== "ok");
    if (!unsure) {
      lastFrames.set(s.id, s.frames.length);
      continue;
    }
    if (!primaryName) {
      probeNotes.push(`session ${s.id}: no primary to ask`);
      continue;
    }
    try {
      const a = await probeSession(hosts.placement[primaryName].guestListen, GUEST, s.id);
      if (a.kind === "held") lastFrames.set(s.id, a.lastFrame);
      else if (a.kind === "unknown-session") lastFrames.set(s.id, undefined);
      else probeNotes.push(`session ${s.id}: probe refused (${a.code}: ${a.message})`);
    } catch (e) {
      probeNotes.push(`session ${s.id}: probe failed (${(e as Error).message})`);
    }
  }
  const afterProbes = primaryName
    ? await getJson<{ state: string }>(`${hosts.placement[primaryName].opsUrl}/v1/digest`)
    : undefined;
  const finalWithProbes: FinalState = { ...final, stateAfterProbes: afterProbes?.state };
  monitor.stop();
  const endMs = now();

  const logs = readNodeLogs(cluster.instances, wallAtZero);
  const held: HeldSession[] = load.sessions
    .filter((s) => lastFrames.has(s.id))
    .map((s) => ({ history: s, tenant: GUEST.tenant, lastFrame: lastFrames.get(s.id) }));
  const reference = replayReference(backendOptionsOf(cluster.configs.a), held);
  const { verdicts, counts } = check({
    mode: o.mode,
    lease: o.lease,
    sessions: load.sessions,
    lastFrames,
    acks: load.acks,
    samples: monitor.samples,
    faults: nemesis.records,
    stepDowns: logs.stepDowns,
    reference,
    final: finalWithProbes,
    unexpectedExits: cluster
      .unexpectedExits()
      .map(
        (i) =>
          `${cluster.nodeId(i.node)} (pid ${i.pid}) exited with ${i.exit} at ${((i.exitedMs ?? 0) / 1000).toFixed(1)} s (log ${i.logFile})`,
      ),
    harnessErrors: [
      ...load.internalErrors,
      ...probeNotes,
      ...(heal.healthy ? [] : ["the pair was not healthy after the final heal"]),
    ],
    nemesisStuck: nemesis.stuck,
    allSettled: settled,
  });
  const ok = verdicts.every((v) => v.ok);
  const failovers = nemesis.records
    .filter(
      (r) => (r.plan.kind === "kill" || r.plan.kind === "pause") && r.failoverMs !== undefined,
    )
    .map((r) => Math.round(r.failoverMs!));
  const faultCounts: Record<string, number> = {};
  for (const r of nemesis.records) {
    if (r.startMs !== undefined) faultCounts[r.plan.kind] = (faultCounts[r.plan.kind] ?? 0) + 1;
  }
  const notes = [
    ...(load.openFailures.length > 0
      ? [
          `${load.openFailures.length} session opens failed and were retried (e.g. "${load.openFailures[0]!.message}")`,
        ]
      : []),
    ...logs.errors
      .slice(0, 20)
      .map(
        (e) =>
          `${cluster.nodeId(e.node)} (pid ${e.pid}) at ${(e.atMs / 1000).toFixed(1)} s: ${e.message}`,
      ),
    ...(logs.errors.length > 20
      ? [`… ${logs.errors.length - 20} more error lines in nodes/*.log`]
      : []),
  ];
  const report: Report = {
    ok,
    parameters: { ...o, out, hosts: hostsLine, replay: replayCommand(o) },
    startedAt: new Date(wallAtZero).toISOString(),
    elapsedS: endMs / 1000,
    plan,
    faults: faultSummaries(nemesis.records, (r) => maxAckGap(load.acks, r)),
    faultCounts,
    failoverMs: percentiles(failovers) ?? null,
    failoverMsByKind: Object.fromEntries(
      ["kill", "pause", "partition", "netem", "kill-standby"].map((kind) => [
        kind,
        percentiles(
          nemesis.records
            .filter((r) => r.plan.kind === kind && r.failoverMs !== undefined)
            .map((r) => Math.round(r.failoverMs!)),
        ),
      ]),
    ),
    counts,
    verdicts,
    stepDowns: logs.stepDowns,
    sessions: sessionSummaries(load.sessions),
    notes,
  };
  writeReport(out, report, load.sessions);
  writeFileSync(
    join(out, "status.jsonl"),
    `${monitor.samples.map((x) => JSON.stringify({ ...x, atMs: Math.round(x.atMs) })).join("\n")}\n`,
  );
  writeFileSync(
    join(out, "timeline.svg"),
    timelineSvg({
      samples: monitor.samples,
      faults: nemesis.records,
      acks: load.acks,
      endMs,
      nodeIds: { a: cluster.nodeId("a"), b: cluster.nodeId("b") },
      title: `vgpu-ha chaos: ${o.mode}, ${o.lease} lease, seed ${o.seed} — ${ok ? "PASS" : "FAIL"}`,
    }),
  );
  await cluster.stopAll();
  console.log(`\n${markdown(report)}`);
  log(`report written to ${out}`);
  return ok ? 0 : 1;
}

/** The longest wait between acknowledgements from a fault's start until the pair was healthy. */
function maxAckGap(acks: readonly { atMs: number }[], r: FaultRecord): number | undefined {
  if (r.startMs === undefined) return undefined;
  const until = r.recoveredMs ?? r.endMs ?? r.startMs;
  let prev = r.startMs;
  let gap = 0;
  for (
    let i = firstIndexAtOrAfter(acks as never, r.startMs);
    i < acks.length && acks[i]!.atMs <= until;
    i++
  ) {
    gap = Math.max(gap, acks[i]!.atMs - prev);
    prev = acks[i]!.atMs;
  }
  return gap;
}

async function getJson<T>(url: string): Promise<T | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return res.ok ? ((await res.json()) as T) : undefined;
  } catch {
    return undefined;
  }
}

interface Digest {
  nodeId: string;
  seq: number;
  state: string;
  gpu: string;
  sessions: string;
}

/** Waits for both nodes to hold equal digests at one seq; then verify on the primary. */
async function finalState(
  cluster: Cluster,
  hosts: Hosts,
  monitor: Monitor,
  healedMs: number,
): Promise<FinalState> {
  const deadline = healedMs + 30_000;
  let primary: Digest | undefined;
  let standby: Digest | undefined;
  let convergedMs: number | undefined;
  for (;;) {
    const p = monitor.currentPrimary();
    if (p) {
      const [dp, ds] = await Promise.all([
        getJson<Digest>(`${hosts.placement[p].opsUrl}/v1/digest`),
        getJson<Digest>(`${hosts.placement[peerOf(p)].opsUrl}/v1/digest`),
      ]);
      primary = dp;
      standby = ds;
      if (dp && ds && dp.seq === ds.seq && dp.state === ds.state) {
        convergedMs = now() - healedMs;
        break;
      }
    }
    if (now() > deadline) break;
    await sleep(100);
  }
  let verify: FinalState["verify"] = { error: "no primary" };
  const p = primary ? cluster.nameOf(primary.nodeId) : undefined;
  if (p) {
    try {
      const res = await fetch(`${hosts.placement[p].opsUrl}/v1/verify`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        signal: AbortSignal.timeout(35_000),
      });
      const body = await res.text();
      verify = res.ok
        ? (JSON.parse(body) as { equal: boolean; seq: number })
        : { error: `verify: ${res.status} ${body}` };
    } catch (e) {
      verify = { error: `verify: ${(e as Error).message}` };
    }
  }
  return {
    primary,
    standby,
    convergedMs,
    verify,
    stateAfterProbes: undefined,
  };
}

/** The last lines of every node log (why a node did not start). */
function tailOfLogs(dir: string): string {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".log"))
    .map((f) => {
      const lines = readFileSync(join(dir, f), "utf8").trim().split("\n").slice(-6);
      return `${join(dir, f)}:\n  ${lines.join("\n  ")}`;
    })
    .join("\n");
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e);
    process.exit(3);
  },
);
