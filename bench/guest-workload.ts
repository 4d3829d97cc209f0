// Guest workloads shared by the benchmarks, run from this process against a real node:
// pipelined small calls from many sessions, sequential call latency, pipelined 64 KiB DMA
// writes; each with the CPU this process and the nodes used while it was measured.
import { performance } from "node:perf_hooks";
import { Session } from "@vgpu-ha/client";
import { machineCpuSeconds, type NodeProcess } from "./node-process.js";
import { percentile } from "./timing.js";

const MiB = 2 ** 20;

export const BENCH_TENANT = { name: "bench", token: "bench-token-0001" } as const;
/** A second tenant, for work beside BENCH_TENANT's (the heavy calls). */
export const BENCH_OTHER_TENANT = { name: "bench-other", token: "bench-token-0002" } as const;

/** Warm-up, then the measured stretch. */
export interface Durations {
  readonly warmupMs: number;
  readonly measureMs: number;
}

/** Small calls each session keeps outstanding. */
export const CALL_WINDOW = 512;
export const DMA_CHUNK_BYTES = 64 * 1024;
const DMA_BO_BYTES = 64 * MiB;
export const DMA_WINDOW = 16;
const LATENCY_WARMUP_CALLS = 500;

export interface Client {
  readonly session: Session;
  readonly context: number;
}

export interface CpuUse {
  /** This process, in % of one core. */
  readonly clientPct: number;
  /** Each node given to the meter, in order, in % of one core. */
  readonly nodePcts: readonly number[];
  /** The whole machine (every process, all cores), in % of one core. */
  readonly machinePct: number;
  /** Each node's threads, in order, in % of one core. */
  readonly nodeThreads: readonly ThreadCpu[];
}

/**
 * A node's CPU by thread: its main thread (the event loop), its busiest other thread over the
 * stretch (the device thread, where the node runs one and the device is busy) and the rest
 * (V8's GC helpers, libuv's pool, an idle device thread).
 */
export interface ThreadCpu {
  readonly mainPct: number;
  readonly devicePct: number;
  readonly otherPct: number;
}

/** A session of BENCH_TENANT (or `tenant`) with one context; `endpoints` for both nodes of a pair. */
export async function openClient(
  endpoint: string | readonly string[],
  tenant: { readonly name: string; readonly token: string } = BENCH_TENANT,
  options: { readonly failoverTimeoutMs?: number } = {},
): Promise<Client> {
  const session = await Session.open({
    ...(typeof endpoint === "string" ? { endpoint } : { endpoints: endpoint }),
    tenant: tenant.name,
    token: tenant.token,
    ...options,
  });
  return { session, context: await session.createContext() };
}

export async function withClients<T>(
  endpoint: string,
  count: number,
  body: (clients: Client[]) => Promise<T>,
): Promise<T> {
  const clients = await Promise.all(Array.from({ length: count }, () => openClient(endpoint)));
  try {
    return await body(clients);
  } finally {
    await Promise.all(clients.map((c) => c.session.close()));
  }
}

/** CPU used by this process and by some nodes over a stretch of wall time. */
export class CpuMeter {
  private readonly nodes: readonly NodeProcess[];
  private wallMs = 0;
  private client = process.cpuUsage();
  private nodeSeconds: number[] = [];
  private nodeThreadSeconds: Map<number, number>[] = [];
  private machineSeconds = 0;

  constructor(nodes: readonly NodeProcess[]) {
    this.nodes = nodes;
  }

  start(): void {
    this.wallMs = performance.now();
    this.client = process.cpuUsage();
    this.nodeSeconds = this.nodes.map((n) => n.cpuSeconds());
    this.nodeThreadSeconds = this.nodes.map((n) => n.threadCpuSeconds());
    this.machineSeconds = machineCpuSeconds();
  }

  stop(): CpuUse {
    const wallSeconds = (performance.now() - this.wallMs) / 1000;
    const used = process.cpuUsage(this.client);
    return {
      clientPct: ((used.user + used.system) / 1e6 / wallSeconds) * 100,
      nodePcts: this.nodes.map(
        (n, i) => ((n.cpuSeconds() - this.nodeSeconds[i]!) / wallSeconds) * 100,
      ),
      machinePct: ((machineCpuSeconds() - this.machineSeconds) / wallSeconds) * 100,
      nodeThreads: this.nodes.map((n, i) =>
        threadSplit(
          n.pid,
          this.nodeThreadSeconds[i] ?? new Map(),
          n.threadCpuSeconds(),
          wallSeconds,
        ),
      ),
    };
  }
}

function threadSplit(
  pid: number,
  before: Map<number, number>,
  after: Map<number, number>,
  wallSeconds: number,
): ThreadCpu {
  const pct = (seconds: number) => (seconds / wallSeconds) * 100;
  let main = 0;
  let busiest = 0;
  let total = 0;
  for (const [tid, seconds] of after) {
    const used = seconds - (before.get(tid) ?? 0);
    total += used;
    if (tid === pid) main = used;
    else busiest = Math.max(busiest, used);
  }
  return { mainPct: pct(main), devicePct: pct(busiest), otherPct: pct(total - main - busiest) };
}

/**
 * Keeps `window` operations outstanding per client until the deadline; counts those completed
 * in the measured stretch after the warm-up.
 */
export async function pipelined(
  nodes: readonly NodeProcess[],
  clients: readonly Client[],
  window: number,
  durations: Durations,
  op: (c: Client, i: number) => Promise<unknown>,
): Promise<CpuUse & { perSecond: number }> {
  const meter = new CpuMeter(nodes);
  const warmEnd = performance.now() + durations.warmupMs;
  const end = warmEnd + durations.measureMs;
  let completed = 0;
  let cpu: CpuUse | undefined;
  let issued = 0;
  const worker = async (c: Client) => {
    for (;;) {
      await op(c, issued++);
      const t = performance.now();
      if (t >= end) {
        cpu ??= meter.stop();
        return;
      }
      if (t >= warmEnd) {
        if (completed === 0) meter.start();
        completed++;
      }
    }
  };
  await Promise.all(clients.flatMap((c) => Array.from({ length: window }, () => worker(c))));
  return { perSecond: completed / (durations.measureMs / 1000), ...cpu! };
}

/** Fences from `sessions` sessions, CALL_WINDOW outstanding each. */
export function smallCalls(
  endpoint: string,
  nodes: readonly NodeProcess[],
  sessions: number,
  durations: Durations,
) {
  return withClients(endpoint, sessions, (clients) =>
    pipelined(nodes, clients, CALL_WINDOW, durations, (c) => c.session.fence(c.context)),
  );
}

/** One fence outstanding at a time for `measureMs`; microseconds per call. */
export function latency(endpoint: string, measureMs: number) {
  return withClients(endpoint, 1, async ([c]) => {
    const { session, context } = c!;
    for (let i = 0; i < LATENCY_WARMUP_CALLS; i++) await session.fence(context);
    const samplesUs: number[] = [];
    const end = performance.now() + measureMs;
    for (let t = performance.now(); t < end; ) {
      await session.fence(context);
      const now = performance.now();
      samplesUs.push((now - t) * 1000);
      t = now;
    }
    return {
      p50: percentile(samplesUs, 50),
      p99: percentile(samplesUs, 99),
      calls: samplesUs.length,
    };
  });
}

/** 64 KiB DMA writes round a 64 MiB buffer, DMA_WINDOW outstanding. */
export function dmaWrites(endpoint: string, nodes: readonly NodeProcess[], durations: Durations) {
  return withClients(endpoint, 1, async ([c]) => {
    const { session, context } = c!;
    const bo = await session.allocBo(context, DMA_BO_BYTES);
    const data = new Uint8Array(DMA_CHUNK_BYTES).fill(0xa5);
    const slots = DMA_BO_BYTES / DMA_CHUNK_BYTES;
    const r = await pipelined(nodes, [c!], DMA_WINDOW, durations, (_, i) =>
      session.dmaWrite(context, bo, (i % slots) * DMA_CHUNK_BYTES, data),
    );
    return { ...r, mbPerSecond: (r.perSecond * DMA_CHUNK_BYTES) / 1e6 };
  });
}

/** Fences from every client, `window` outstanding each, until stop(): the calls answered. */
export function backgroundCalls(clients: readonly Client[], window: number) {
  let stopping = false;
  let answered = 0;
  const worker = async (c: Client) => {
    while (!stopping) {
      await c.session.fence(c.context);
      answered++;
    }
  };
  const all = Promise.all(clients.flatMap((c) => Array.from({ length: window }, () => worker(c))));
  all.catch(() => undefined); // a failed call surfaces in stop()
  return {
    answered: () => answered,
    stop: async () => {
      stopping = true;
      await all;
      return answered;
    },
  };
}
