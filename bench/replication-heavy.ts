// Heavy calls (#14): on a fresh sync pair (default lease unless BENCH_LEASE_MS), one tenant
// makes small calls one at a time (fences) while another issues one heavy call: a 1 GiB `fill`,
// then (on a new pair) a gemm at the configured device.maxKernelWork, the largest legal
// square-ish shape. Both tenants' sessions know both nodes, as guests of a pair do. Each call
// is bounded by HEAVY_CALL_TIMEOUT_MS: a pair that fails over on it still completes the phase.
// Measured per call: its time and outcome, the epoch change over both nodes (status epoch
// before the call and SETTLE_MS after it), lease events in the logs, each node's max
// event-loop lag over the call (prom-client's nodejs_eventloop_lag_max_seconds, reset at each
// scrape: scraped right before the call and after the settle), and the other tenant's
// p50/p99/max over the calls that overlapped the heavy call.
import { buf, u32 } from "@vgpu-ha/client";
import { ConfigSchema } from "@vgpu-ha/common";
import { type Cluster, primaryConfig, startPair } from "./cluster.js";
import { BENCH_OTHER_TENANT, type Client, openClient } from "./guest-workload.js";
import { type CallSample, sampleLatency } from "./latency-sampler.js";
import { tallyLeaseEvents } from "./lease-events.js";
import type { NodeProcess } from "./node-process.js";
import { sampleSum, scrape, status } from "./ops-client.js";
import type { Metric } from "./report.js";
import { percentile, sleepMs } from "./timing.js";

const GiB = 2 ** 30;
const FILL_BYTES = GiB;
const HEAVY_CALL_TIMEOUT_MS = 30_000;
/** Load alone before the call, and time after it for lease effects to show. */
const BASELINE_MS = 300;
const SETTLE_MS = 1000;
const OPS_TIMEOUT_MS = HEAVY_CALL_TIMEOUT_MS;
const CLOSE_TIMEOUT_MS = 2000;
const LOOP_LAG_TARGET_MS = 100;

interface HeavyCall {
  readonly name: "fill_1g" | "gemm_max";
  readonly what: string;
  /** Allocates what the call needs (not timed); returns the call. */
  prepare(c: Client): Promise<() => Promise<void>>;
}

export interface HeavyRun {
  readonly name: string;
  readonly what: string;
  readonly outcome: string;
  readonly callMs: number;
  readonly epochBefore: number;
  readonly epochAfter: number | null;
  readonly epochChanges: number;
  readonly leaseEvents: ReturnType<typeof tallyLeaseEvents>;
  readonly primaryLoopLagMaxMs: number | null;
  readonly standbyLoopLagMaxMs: number | null;
  readonly otherTenant: {
    readonly calls: number;
    readonly unanswered: number;
    readonly p50Ms: number;
    readonly p99Ms: number;
    readonly maxMs: number;
  };
}

/** device.maxKernelWork of the bench primary's config (the default unless the bench sets it). */
export function configuredMaxKernelWork(): number {
  return ConfigSchema.parse(primaryConfig({ mode: "sync", peer: "127.0.0.1:1" })).device
    .maxKernelWork;
}

/** m = n = ⌊∛work⌋, k = ⌊work / (m·n)⌋: the largest square-ish gemm with m·n·k ≤ work. */
export function gemmShape(work: number) {
  let s = Math.floor(Math.cbrt(work));
  while (s ** 3 > work) s--;
  while ((s + 1) ** 3 <= work) s++;
  return { m: s, n: s, k: Math.floor(work / (s * s)) };
}

function heavyCalls(): HeavyCall[] {
  const work = configuredMaxKernelWork();
  const { m, n, k } = gemmShape(work);
  return [
    {
      name: "fill_1g",
      what: `fill of a ${FILL_BYTES / GiB} GiB buffer (work ${FILL_BYTES / 4})`,
      prepare: async ({ session, context }) => {
        const bo = await session.allocBo(context, FILL_BYTES);
        return () => session.launch(context, "fill", [buf(bo), u32(FILL_BYTES / 4), u32(7)]);
      },
    },
    {
      name: "gemm_max",
      what: `gemm_f32 ${m}x${n}x${k} (work ${m * n * k} of maxKernelWork ${work})`,
      prepare: async ({ session, context }) => {
        const c = await session.allocBo(context, m * n * 4);
        const a = await session.allocBo(context, m * k * 4);
        const b = await session.allocBo(context, k * n * 4);
        const args = [buf(c), buf(a), buf(b), u32(m), u32(n), u32(k)];
        return () => session.launch(context, "gemm_f32", args);
      },
    },
  ];
}

/** The call's outcome within `ms`: "ok", "timeout" or the error; it is never left unhandled. */
async function within(ms: number, call: Promise<void>): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve(`timeout after ${ms} ms`), ms);
  });
  const outcome = call.then(
    () => "ok",
    (e: unknown) => `error: ${(e as Error).message}`,
  );
  try {
    return await Promise.race([outcome, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Max event-loop lag since the previous scrape, ms; null when the node did not answer. */
async function loopLagMaxMs(node: NodeProcess): Promise<number | null> {
  try {
    return sampleSum(await scrape(node, OPS_TIMEOUT_MS), "nodejs_eventloop_lag_max_seconds") * 1000;
  } catch {
    return null;
  }
}

async function epochOf(node: NodeProcess): Promise<number | null> {
  try {
    return Number((await status(node, OPS_TIMEOUT_MS)).epoch);
  } catch {
    return null;
  }
}

/** Waits of the calls that overlapped [fromMs, toMs] (unanswered ones last until toMs). */
function overlapping(samples: readonly CallSample[], fromMs: number, toMs: number) {
  const hit = samples.filter((s) => s.sentMs <= toMs && s.answeredMs >= fromMs);
  const waits = hit.map((s) => Math.min(s.answeredMs, toMs) - s.sentMs);
  return {
    calls: hit.length,
    unanswered: hit.filter((s) => !Number.isFinite(s.answeredMs)).length,
    p50Ms: percentile(waits, 50),
    p99Ms: percentile(waits, 99),
    maxMs: Math.max(0, ...waits),
  };
}

const wallMs = () => performance.timeOrigin + performance.now();

async function closeWithin(c: Client): Promise<void> {
  await within(CLOSE_TIMEOUT_MS, c.session.close());
}

async function runHeavy(call: HeavyCall): Promise<HeavyRun> {
  const label = `heavy-${call.name}`;
  const cluster: Cluster = await startPair({ label, mode: "sync" });
  const clients: Client[] = [];
  try {
    const endpoints = cluster.nodes.map((n) => n.guest);
    const options = { failoverTimeoutMs: HEAVY_CALL_TIMEOUT_MS };
    const load = await openClient(endpoints, undefined, options);
    clients.push(load);
    const heavy = await openClient(endpoints, BENCH_OTHER_TENANT, options);
    clients.push(heavy);
    const issue = await call.prepare(heavy);
    const sampler = sampleLatency(load);
    await sleepMs(BASELINE_MS);
    const [primary, standby] = [cluster.primary, cluster.standby!];
    await Promise.all([loopLagMaxMs(primary), loopLagMaxMs(standby)]); // resets both
    const epochBefore = Math.max((await epochOf(primary)) ?? 0, (await epochOf(standby)) ?? 0);
    const startMs = wallMs();
    const outcome = await within(HEAVY_CALL_TIMEOUT_MS, issue());
    const endMs = wallMs();
    await sleepMs(SETTLE_MS);
    const [primaryLag, standbyLag] = await Promise.all([
      loopLagMaxMs(primary),
      loopLagMaxMs(standby),
    ]);
    const epochs = (await Promise.all(cluster.nodes.map(epochOf))).filter((e) => e !== null);
    const epochAfter = epochs.length === 0 ? null : Math.max(...epochs);
    let samples: CallSample[] = [];
    let samplerError = "";
    try {
      samples = await sampler.stop(CLOSE_TIMEOUT_MS);
    } catch (e) {
      samplerError = `; the other tenant's calls failed: ${(e as Error).message}`;
    }
    const run: HeavyRun = {
      name: call.name,
      what: call.what,
      outcome: `${outcome}${samplerError}`,
      callMs: endMs - startMs,
      epochBefore,
      epochAfter,
      // A node that no longer answers counts as a change: the pair did not stay whole.
      epochChanges: epochAfter === null ? 1 : epochAfter - epochBefore,
      leaseEvents: tallyLeaseEvents(label, cluster.nodes),
      primaryLoopLagMaxMs: primaryLag,
      standbyLoopLagMaxMs: standbyLag,
      otherTenant: overlapping(samples, startMs, endMs),
    };
    console.log(
      `  ${call.name}: ${run.outcome} in ${run.callMs.toFixed(0)} ms, epoch +${run.epochChanges}, primary loop lag ${run.primaryLoopLagMaxMs?.toFixed(0)} ms, other tenant p99 ${run.otherTenant.p99Ms.toFixed(1)} ms`,
    );
    return run;
  } finally {
    await Promise.all(clients.map(closeWithin));
    await cluster.stop();
  }
}

export async function measureHeavy(): Promise<HeavyRun[]> {
  const runs: HeavyRun[] = [];
  for (const call of heavyCalls()) runs.push(await runHeavy(call));
  return runs;
}

export function heavyMetrics(runs: readonly HeavyRun[]): Metric[] {
  const out: Metric[] = [];
  for (const r of runs) {
    const p = `heavy_call_${r.name}`;
    out.push(
      { name: `${p}_ms`, value: r.callMs, unit: `ms (${r.outcome}; ${r.what})` },
      {
        name: `${p}_epoch_changes`,
        value: r.epochChanges,
        unit: `epochs (lapses ${r.leaseEvents.lapses}, promotions ${r.leaseEvents.promotions}, step-downs ${r.leaseEvents.stepDowns})`,
      },
      {
        name: `${p}_max_loop_lag_ms`,
        value: r.primaryLoopLagMaxMs ?? Number.NaN,
        unit: `ms, primary (standby ${r.standbyLoopLagMaxMs?.toFixed(0) ?? "no answer"} ms)`,
      },
      {
        name: `${p}_other_tenant_p99_ms`,
        value: r.otherTenant.p99Ms,
        unit: `ms (${r.otherTenant.calls} calls, p50 ${r.otherTenant.p50Ms.toFixed(1)}, max ${r.otherTenant.maxMs.toFixed(0)}, unanswered ${r.otherTenant.unanswered})`,
      },
    );
  }
  const lags = runs.map((r) => r.primaryLoopLagMaxMs ?? Number.POSITIVE_INFINITY);
  out.push(
    {
      name: "heavy_call_epoch_changes",
      value: runs.reduce((n, r) => n + r.epochChanges, 0),
      unit: "epochs (all heavy calls)",
      target: { kind: "atMost", value: 0, note: "#14: a legal call never costs the lease" },
    },
    {
      name: "heavy_call_max_loop_lag_ms",
      value: Math.max(...lags),
      unit: "ms (primary, worst heavy call)",
      target: { kind: "atMost", value: LOOP_LAG_TARGET_MS, note: "#14" },
    },
    {
      name: "heavy_call_other_tenant_p99_ms",
      value: Math.max(...runs.map((r) => r.otherTenant.p99Ms)),
      unit: "ms (worst heavy call)",
    },
  );
  return out;
}

export const HEAVY_NOTE = `heavy: a fresh sync pair per heavy call (lease ${process.env.BENCH_LEASE_MS ?? "default 500"} ms), tenant ${BENCH_OTHER_TENANT.name} issues the call (a ${FILL_BYTES / GiB} GiB fill; a gemm_f32 at device.maxKernelWork of the bench config, m = n = floor(cbrt(work)), k = floor(work / m / n)) while tenant bench sends fences one at a time; both sessions know both nodes; each call bounded by ${HEAVY_CALL_TIMEOUT_MS} ms; epoch_changes = max status epoch over both nodes ${SETTLE_MS} ms after the call minus before it (a node not answering counts 1); max_loop_lag_ms = nodejs_eventloop_lag_max_seconds (prom-client, monitorEventLoopDelay; reset at each scrape) scraped right before the call and ${SETTLE_MS} ms after it; other_tenant_p99_ms = p99 of the fences that overlapped the call (unanswered ones counted to its end)`;
