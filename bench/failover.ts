// Failover benchmark, real processes over loopback: one sync pair per lease setting (the
// product's default 500 ms lease, then a 200 ms lease) whose nodes know each other's ports, so
// either may be primary. Guests keep increments (a non-idempotent kernel) in flight the whole
// time while rounds of three events alternate the primary's role:
//   kill        SIGKILL of the primary; the killed node is restarted and rejoins as standby
//   pause       SIGSTOP of the primary past the lease, SIGCONT once every guest moved; the
//               woken node steps down and rejoins by itself
//   switchover  POST /v1/switchover on the primary
// Every time is measured by the guests (performance.now() of this process): failover_ms is
// the signal → the first acknowledgement answered by the new primary (any guest);
// switchover_pause_ms the longest gap between consecutive acknowledgements of a guest issuing
// one call at a time, from its last acknowledgement before the POST to shortly after its first
// on the new primary. lost_acked and duplicates compare each guest's acknowledged increments
// with its counter read back at the end.
// BENCH_FAILOVER_ROUNDS=N rounds per lease (30); BENCH_FAILOVER_BUDGET_S=S whole-run budget the
// later lease settings stop within (330); BENCH_KEEP_LOGS=1 keeps the nodes' directories.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { buf, Session, u32 } from "@vgpu-ha/client";
import { pairConfigs, type SpawnedNode, spawnVgpud } from "@vgpu-ha/daemon";
import { BENCH_TENANT } from "./guest-workload.js";
import type { NodeStatus } from "./ops-client.js";
import { type Metric, publish, type Target } from "./report.js";
import { percentile, sleepMs } from "./timing.js";

const ADMIN_TOKEN = "bench-admin-token-0001";
const ROUNDS = envInt("BENCH_FAILOVER_ROUNDS", 30);
const BUDGET_MS = envInt("BENCH_FAILOVER_BUDGET_S", 330) * 1000;
/** Guests pipelining increments, and how many each keeps outstanding. */
const PIPELINED_GUESTS = 2;
const PIPELINE_WINDOW = 4;
/** Load on the current primary before each event, at least. */
const SETTLE_MS = 150;
const SETTLE_ACKS = 20;
/** Acknowledgements of the sequential guest recorded after its first on the new primary. */
const SWITCHOVER_TAIL_ACKS = 20;
/** A bound for a hung step, never a measurement. */
const STEP_TIMEOUT_MS = 30_000;
const POLL_MS = 10;

type NodeName = "a" | "b";
const other = (n: NodeName): NodeName => (n === "a" ? "b" : "a");

export interface LeaseSetting {
  readonly name: string;
  readonly describe: string;
  /** Config `lease`; the product's defaults when undefined. */
  readonly lease: Record<string, number> | undefined;
  /** Whether the issue's targets apply (they are stated for the defaults). */
  readonly targets: boolean;
  /** Config `device` over the pair's own (gpu.ts: device.backend webgpu). */
  readonly device?: Record<string, unknown>;
  /** A command each node runs under (spawnVgpud's `wrap`: GPU placement, gpu.ts). */
  readonly wraps?: Partial<Record<"a" | "b", readonly string[]>>;
  /** Rounds of each event (BENCH_FAILOVER_ROUNDS otherwise). */
  readonly rounds?: number;
}

const SETTINGS: readonly LeaseSetting[] = [
  { name: "lease500", describe: "default lease (500/100/50 ms)", lease: undefined, targets: true },
  {
    name: "lease200",
    describe: "lease 200 ms, heartbeat 50 ms, drift margin 20 ms",
    lease: { durationMs: 200, heartbeatMs: 50, driftMarginMs: 20, maxDriftRatio: 0.01 },
    targets: false,
  },
];

function envInt(name: string, fallback: number): number {
  const v = Number(process.env[name] ?? "");
  return Number.isInteger(v) && v > 0 ? v : fallback;
}

function withTimeout<T>(what: string, p: Promise<T>, ms = STEP_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

async function until(what: string, probe: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = performance.now() + STEP_TIMEOUT_MS;
  let last: unknown;
  for (;;) {
    try {
      if (await probe()) return;
    } catch (e) {
      last = e; // a node restarting: keep polling
    }
    if (performance.now() > deadline) {
      throw new Error(`${what}: not within ${STEP_TIMEOUT_MS} ms (${String(last ?? "")})`);
    }
    await sleepMs(POLL_MS);
  }
}

// ---- the pair ----

/** Two vgpuds on ports fixed up front, each with its own state directory kept across restarts. */
class FailoverPair {
  readonly dir = mkdtempSync(path.join(os.tmpdir(), "vgpu-bench-failover-"));
  primary: NodeName = "a";
  private readonly configs = new Map<NodeName, Record<string, unknown>>();
  private readonly nodes = new Map<NodeName, SpawnedNode>();
  private readonly spawned: SpawnedNode[] = [];
  private readonly killAtExit = () => {
    for (const n of this.spawned) n.process.kill("SIGKILL");
  };
  private starts = 0;
  private wraps: LeaseSetting["wraps"] = {};

  static async create(setting: LeaseSetting): Promise<FailoverPair> {
    const pair = new FailoverPair();
    pair.wraps = setting.wraps ?? {};
    process.on("exit", pair.killAtExit);
    const [a, b] = await pairConfigs({
      names: ["a", "b"],
      dir: pair.dir,
      clusterId: "bench-failover",
      seeds: [11, 22],
      common: {
        replication: { mode: "sync" },
        ops: { token: ADMIN_TOKEN },
        ...(setting.lease === undefined ? {} : { lease: setting.lease }),
        device: { vramBytes: "256MiB", ...setting.device },
        tenants: [{ ...BENCH_TENANT, vramQuotaBytes: "128MiB" }],
        log: { level: "info" },
      },
    });
    pair.configs.set("a", a);
    pair.configs.set("b", b);
    try {
      await pair.start("b");
      await pair.start("a");
      await pair.waitStreaming();
    } catch (e) {
      await pair.stop();
      throw e;
    }
    return pair;
  }

  /** Both guest endpoints. */
  get endpoints(): string[] {
    return (["a", "b"] as const).map(
      (n) => (this.configs.get(n)!.guest as { listen: string }).listen,
    );
  }

  node(name: NodeName): SpawnedNode {
    return this.nodes.get(name)!;
  }

  async start(name: NodeName): Promise<void> {
    const wrap = this.wraps?.[name];
    const node = await spawnVgpud({
      config: this.configs.get(name)!,
      dir: this.dir,
      name: `${name}-${this.starts++}`,
      ...(wrap ? { wrap } : {}),
    });
    this.spawned.push(node);
    this.nodes.set(name, node);
  }

  async status(name: NodeName): Promise<NodeStatus> {
    const res = await fetch(`${this.node(name).ops}/v1/status`);
    if (!res.ok) throw new Error(`${name}: GET /v1/status ${res.status}`);
    return (await res.json()) as NodeStatus;
  }

  /**
   * Until the primary streams to its standby again and the standby calls itself eligible to
   * promote: the pair is whole (streaming alone was seen before the replica was complete).
   */
  waitStreaming(): Promise<void> {
    const standby = other(this.primary);
    return until(`${this.primary} streaming, ${standby} eligible`, async () => {
      const s = await this.status(this.primary);
      if (s.role !== "primary" || s.replication?.state !== "streaming") return false;
      const b = await this.status(standby);
      return (
        b.role === "standby" && (b.replication as { eligible?: boolean } | null)?.eligible === true
      );
    });
  }

  /** SIGCONT and stop every process ever started; removes the directory. */
  async stop(): Promise<void> {
    for (const n of this.spawned) {
      try {
        n.process.kill("SIGCONT");
      } catch {
        // already gone
      }
    }
    await Promise.all(this.spawned.map((n) => n.stop(5000)));
    process.off("exit", this.killAtExit);
    if (process.env.BENCH_KEEP_LOGS !== "1") rmSync(this.dir, { recursive: true, force: true });
    else console.log(`  logs kept in ${this.dir}`);
  }
}

// ---- the guests ----

/**
 * A session incrementing its own counter with `window` calls outstanding until stop(); it
 * counts every acknowledgement and can report the first one answered by another node.
 */
class CountingGuest {
  acked = 0;
  error: Error | undefined;
  private watch: { from: string; resolve: (ms: number) => void } | undefined;
  private recording: number[] | undefined;
  private lastAckMs = 0;
  private stopping = false;
  private workers: Promise<void>[] = [];

  private constructor(
    readonly session: Session,
    private readonly ctx: number,
    private readonly counter: number,
    readonly window: number,
  ) {}

  static async open(endpoints: string[], window: number): Promise<CountingGuest> {
    const session = await Session.open({
      endpoints,
      tenant: BENCH_TENANT.name,
      token: BENCH_TENANT.token,
      failoverTimeoutMs: STEP_TIMEOUT_MS,
    });
    const ctx = await session.createContext();
    const counter = await session.allocBo(ctx, 4096);
    return new CountingGuest(session, ctx, counter, window);
  }

  start(): void {
    this.workers = Array.from({ length: this.window }, () => this.work());
  }

  private async work(): Promise<void> {
    try {
      while (!this.stopping) {
        await this.session.launch(this.ctx, "increment_u32", [buf(this.counter), u32(1), u32(1)]);
        this.onAck();
      }
    } catch (e) {
      this.error ??= e as Error;
    }
  }

  private onAck(): void {
    const t = performance.now();
    this.acked++;
    this.lastAckMs = t;
    this.recording?.push(t);
    if (this.watch !== undefined && this.session.nodeId !== this.watch.from) {
      this.watch.resolve(t);
      this.watch = undefined;
    }
  }

  /** When the first acknowledgement from a node other than `from` arrives. */
  firstAckAwayFrom(from: string): Promise<number> {
    return new Promise((resolve) => {
      this.watch = { from, resolve };
    });
  }

  /** Records acknowledgement times from now, starting with the last one before. */
  record(): void {
    this.recording = [this.lastAckMs];
  }

  /** The longest interval between consecutive recorded acknowledgements. */
  longestGapMs(): number {
    const times = this.recording ?? [];
    this.recording = undefined;
    let gap = 0;
    for (let i = 1; i < times.length; i++) gap = Math.max(gap, times[i]! - times[i - 1]!);
    return gap;
  }

  recordedAcks(): number {
    return (this.recording?.length ?? 1) - 1;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.workers);
  }

  /** The counter read back against the acknowledged increments. */
  async check(): Promise<{
    acknowledged: number;
    applied: number;
    lost: number;
    duplicates: number;
  }> {
    const bytes = await this.session.dmaRead(this.ctx, this.counter, 0, 4);
    const applied = new Uint32Array(bytes.slice().buffer)[0]!;
    return {
      acknowledged: this.acked,
      applied,
      lost: Math.max(0, this.acked - applied),
      duplicates: Math.max(0, applied - this.acked),
    };
  }
}

function describeGuest(g: CountingGuest) {
  const s = g.session;
  return {
    nodeId: s.nodeId,
    epoch: s.epoch,
    resumes: s.resumes,
    acked: g.acked,
    error: g.error?.message,
  };
}

function failed(guests: readonly CountingGuest[]): void {
  const g = guests.find((x) => x.error !== undefined);
  if (g !== undefined) throw new Error(`a guest failed: ${g.error!.message}`);
}

/** Every guest acknowledged by the current primary, for a while, before the next event. */
async function settle(pair: FailoverPair, guests: readonly CountingGuest[]): Promise<void> {
  const start = performance.now();
  const before = guests.map((g) => g.acked);
  await until("guests settled on the primary", () => {
    failed(guests);
    return (
      performance.now() - start >= SETTLE_MS &&
      guests.every(
        (g, i) => g.session.nodeId === pair.primary && g.acked >= before[i]! + SETTLE_ACKS,
      )
    );
  });
}

// ---- the rounds ----

interface FailoverSample {
  /** Signal → first acknowledgement by the new primary, any guest. */
  readonly firstMs: number;
  /** Signal → the last guest's first acknowledgement by the new primary. */
  readonly allGuestsMs: number;
  /** Back to a streaming pair after the signal (restart or step-down, resync). */
  readonly rejoinedMs: number;
}

interface SwitchoverSample {
  /** Longest gap of the sequential guest around the switchover. */
  readonly pauseMs: number;
  /** POST → the sequential guest's first acknowledgement by the new primary. */
  readonly firstMs: number;
  /** The pause the demoted primary reported in its answer. */
  readonly nodePauseMs: number;
  readonly rejoinedMs: number;
}

async function movedAway(
  guests: readonly CountingGuest[],
  from: NodeName,
  signal: () => void,
): Promise<{ t0: number; firstMs: number; allGuestsMs: number }> {
  const moved = guests.map((g) => g.firstAckAwayFrom(from));
  const t0 = performance.now();
  signal();
  const times = await withTimeout(
    `guests acknowledged by ${other(from)}`,
    Promise.all(moved),
  ).catch((e: Error) => {
    throw new Error(`${e.message}; guests: ${JSON.stringify(guests.map(describeGuest))}`);
  });
  return { t0, firstMs: Math.min(...times) - t0, allGuestsMs: Math.max(...times) - t0 };
}

async function killRound(
  pair: FailoverPair,
  guests: readonly CountingGuest[],
): Promise<FailoverSample> {
  await settle(pair, guests);
  const from = pair.primary;
  const victim = pair.node(from);
  const m = await movedAway(guests, from, () => victim.process.kill("SIGKILL"));
  pair.primary = other(from);
  await withTimeout(`${from} exited`, victim.exited);
  await pair.start(from);
  await pair.waitStreaming();
  return { firstMs: m.firstMs, allGuestsMs: m.allGuestsMs, rejoinedMs: performance.now() - m.t0 };
}

async function pauseRound(
  pair: FailoverPair,
  guests: readonly CountingGuest[],
): Promise<FailoverSample> {
  await settle(pair, guests);
  const from = pair.primary;
  const victim = pair.node(from);
  let m: { t0: number; firstMs: number; allGuestsMs: number };
  try {
    m = await movedAway(guests, from, () => victim.process.kill("SIGSTOP"));
  } finally {
    victim.process.kill("SIGCONT");
  }
  pair.primary = other(from);
  await until(`${from} stepped down`, async () => (await pair.status(from)).role === "standby");
  await pair.waitStreaming();
  return { firstMs: m.firstMs, allGuestsMs: m.allGuestsMs, rejoinedMs: performance.now() - m.t0 };
}

async function switchoverRound(
  pair: FailoverPair,
  guests: readonly CountingGuest[],
  sequential: CountingGuest,
): Promise<SwitchoverSample> {
  await settle(pair, guests);
  const from = pair.primary;
  const moved = sequential.firstAckAwayFrom(from);
  sequential.record();
  const t0 = performance.now();
  const res = await fetch(`${pair.node(from).ops}/v1/switchover`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  const body = (await res.json()) as { pauseMs?: number; message?: string };
  if (res.status !== 200) throw new Error(`switchover: ${res.status} ${body.message ?? ""}`);
  const firstAt = await withTimeout("sequential guest on the new primary", moved);
  const seen = sequential.recordedAcks();
  await until("acknowledgements after the switchover", () => {
    failed(guests);
    return sequential.recordedAcks() >= seen + SWITCHOVER_TAIL_ACKS;
  });
  const pauseMs = sequential.longestGapMs();
  pair.primary = other(from);
  await pair.waitStreaming();
  return {
    pauseMs,
    firstMs: firstAt - t0,
    nodePauseMs: body.pauseMs ?? Number.NaN,
    rejoinedMs: performance.now() - t0,
  };
}

// ---- one lease setting ----

export interface SettingResult {
  readonly setting: LeaseSetting;
  readonly kill: FailoverSample[];
  readonly pause: FailoverSample[];
  readonly switchover: SwitchoverSample[];
  readonly guests: { window: number; acknowledged: number; applied: number; resumes: number }[];
  readonly lostAcked: number;
  readonly duplicates: number;
  readonly stoppedEarly: boolean;
  /** The round that did not complete and why (the setting stopped there). */
  readonly failure: string | undefined;
  readonly seconds: number;
}

export async function runSetting(
  setting: LeaseSetting,
  deadlineMs: number | undefined,
): Promise<SettingResult> {
  const rounds = setting.rounds ?? ROUNDS;
  const started = performance.now();
  console.log(`  ${setting.name}: ${setting.describe}`);
  const pair = await FailoverPair.create(setting);
  const guests: CountingGuest[] = [];
  try {
    for (let i = 0; i < PIPELINED_GUESTS; i++)
      guests.push(await CountingGuest.open(pair.endpoints, PIPELINE_WINDOW));
    const sequential = await CountingGuest.open(pair.endpoints, 1);
    guests.push(sequential);
    for (const g of guests) g.start();
    const kill: FailoverSample[] = [];
    const pause: FailoverSample[] = [];
    const switchover: SwitchoverSample[] = [];
    let stoppedEarly = false;
    let failure: string | undefined;
    for (let round = 0; round < rounds; round++) {
      const roundStart = performance.now();
      try {
        const k = await killRound(pair, guests);
        const p = await pauseRound(pair, guests);
        const s = await switchoverRound(pair, guests, sequential);
        kill.push(k);
        pause.push(p);
        switchover.push(s);
      } catch (e) {
        failure = `round ${round + 1}: ${(e as Error).message}`;
        console.log(`    ${failure}`);
        break;
      }
      const now = performance.now();
      console.log(
        `    round ${round + 1}: kill ${kill.at(-1)!.firstMs.toFixed(0)} ms, pause ${pause.at(-1)!.firstMs.toFixed(0)} ms, switchover gap ${switchover.at(-1)!.pauseMs.toFixed(1)} ms (${((now - roundStart) / 1000).toFixed(1)} s)`,
      );
      if (
        deadlineMs !== undefined &&
        round + 1 < rounds &&
        now + 1.3 * (now - roundStart) > deadlineMs
      ) {
        stoppedEarly = true;
        break;
      }
    }
    const checks: (Awaited<ReturnType<CountingGuest["check"]>> & {
      window: number;
      resumes: number;
    })[] = [];
    if (failure === undefined) {
      await Promise.all(guests.map((g) => g.stop()));
      failed(guests);
      for (const g of guests)
        checks.push({ ...(await g.check()), window: g.window, resumes: g.session.resumes });
    }
    // A failed round leaves the counters unchecked (a guest may be stuck): NaN, not 0.
    const sum = (f: (c: (typeof checks)[number]) => number) =>
      failure === undefined ? checks.reduce((a, c) => a + f(c), 0) : Number.NaN;
    return {
      setting,
      kill,
      pause,
      switchover,
      guests: checks.map(({ window, acknowledged, applied, resumes }) => ({
        window,
        acknowledged,
        applied,
        resumes,
      })),
      lostAcked: sum((c) => c.lost),
      duplicates: sum((c) => c.duplicates),
      stoppedEarly,
      failure,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await Promise.all(guests.map((g) => g.session.close().catch(() => undefined)));
    await pair.stop();
  }
}

// ---- report ----

const atMost = (value: number, note: string): Target => ({ kind: "atMost", value, note });

export function settingMetrics(r: SettingResult): Metric[] {
  const p = r.setting.name;
  const t = r.setting.targets;
  const ms = (name: string, value: number, target?: Target): Metric => ({
    name: `${p}_${name}`,
    value,
    unit: "ms",
    ...(target === undefined ? {} : { target }),
  });
  const kill = r.kill.map((s) => s.firstMs);
  const killAll = r.kill.map((s) => s.allGuestsMs);
  const pause = r.pause.map((s) => s.firstMs);
  const gap = r.switchover.map((s) => s.pauseMs);
  const zero = atMost(0, "sync");
  return [
    ms("failover_ms_p50", percentile(kill, 50)),
    ms("failover_ms_p99", percentile(kill, 99), t ? atMost(1000, "issue, defaults") : undefined),
    ms("failover_ms_max", Math.max(...kill)),
    ms("failover_all_guests_ms_p99", percentile(killAll, 99)),
    ms("pause_failover_ms_p50", percentile(pause, 50)),
    ms("pause_failover_ms_p99", percentile(pause, 99)),
    ms("pause_failover_ms_max", Math.max(...pause)),
    ms("switchover_pause_ms_p50", percentile(gap, 50)),
    ms(
      "switchover_pause_ms_p99",
      percentile(gap, 99),
      t ? atMost(100, "issue, defaults") : undefined,
    ),
    ms("switchover_pause_ms_max", Math.max(...gap)),
    { name: `${p}_rounds`, value: r.kill.length, unit: "rounds" },
    { name: `${p}_lost_acked`, value: r.lostAcked, unit: "calls", target: zero },
    { name: `${p}_duplicates`, value: r.duplicates, unit: "calls", target: zero },
  ];
}

export async function runFailover(): Promise<void> {
  const startedMs = performance.now();
  const loadBefore = os.loadavg();
  const results: SettingResult[] = [];
  for (const [i, setting] of SETTINGS.entries()) {
    // The first setting always runs every round; later ones stop within the budget.
    results.push(await runSetting(setting, i === 0 ? undefined : startedMs + BUDGET_MS));
  }
  const notes = [
    `${os.cpus().length} cores shared by the benchmark client (all guests), both nodes and anything else on the machine; load average at start ${loadBefore.map((l) => l.toFixed(2)).join(" ")}`,
    `one sync pair per lease setting, reused across rounds; each round = kill, pause, switchover (each alternates the primary); guests: ${PIPELINED_GUESTS} sessions x ${PIPELINE_WINDOW} increment_u32 outstanding + 1 session one at a time, running through every round; before each event every guest has ${SETTLE_ACKS}+ acknowledgements from the current primary and at least ${SETTLE_MS} ms passed`,
    "failover_ms / pause_failover_ms: performance.now() before kill(SIGKILL|SIGSTOP) → the first acknowledgement (any guest) while the guest's session is attached to the other node (session.nodeId changed); *_all_guests_* = until every guest had one; SIGCONT once every guest moved; killed nodes restarted with their own config and state directory, each round waits for the new primary's replication.state streaming",
    `switchover_pause_ms: longest gap between consecutive acknowledgements of the one-at-a-time guest, from its last acknowledgement before POST /v1/switchover to ${SWITCHOVER_TAIL_ACKS} acknowledgements after its first on the new primary (the pipelined guests keep loading the pair meanwhile); data.*.switchover.nodePauseMs is the pause the demoted node reported`,
    "lost_acked = Σ max(0, acknowledged − counter) and duplicates = Σ max(0, counter − acknowledged) per guest, counter read back after the last round; clients use Session defaults (keepalive 500 ms, which bounds how soon a guest notices a SIGSTOPped primary)",
    "targets (failover p99 ≤ 1000 ms, switchover pause p99 ≤ 100 ms) are stated for the default lease; lease200 rows have none",
    ...results.map(
      (r) =>
        `${r.setting.name}: ${r.kill.length} rounds of each event in ${r.seconds.toFixed(0)} s${r.stoppedEarly ? ` — stopped before ${ROUNDS} rounds to keep the run within ${BUDGET_MS / 1000} s` : ""}${r.failure === undefined ? "" : ` — FAILED ${r.failure}; counters not checked`}`,
    ),
    `whole run ${((performance.now() - startedMs) / 1000).toFixed(0)} s`,
  ];
  publish({
    name: "failover",
    metrics: results.flatMap(settingMetrics),
    notes,
    data: Object.fromEntries(
      results.map((r) => [
        r.setting.name,
        {
          lease: r.setting.lease ?? "defaults",
          rounds: r.kill.length,
          stoppedEarly: r.stoppedEarly,
          failure: r.failure ?? null,
          seconds: r.seconds,
          guests: r.guests,
          kill: r.kill,
          pause: r.pause,
          switchover: r.switchover,
        },
      ]),
    ),
  });
}
