// Guest benchmark against a real vgpud over loopback: pipelined small calls from 1 and 8
// sessions, sequential call latency, 64 KiB DMA writes, MMIO stores through a mapped buffer,
// and the node's RSS with 1 GiB of buffers written. Client and node are separate processes
// sharing this machine's cores; the CPU each used is reported beside the throughputs.
import os from "node:os";
import { performance } from "node:perf_hooks";
import { buf, Session, u32 } from "@vgpu-ha/client";
import { type NodeProcess, startNode } from "./node-process.js";
import { type Metric, publish } from "./report.js";
import { percentile, sleepMs, yieldToLoop } from "./timing.js";

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const TENANT = { name: "bench", token: "bench-token-0001" };

const WARMUP_MS = 500;
const MEASURE_MS = 3000;
/** Small calls each session keeps outstanding. */
const CALL_WINDOW = 512;
const LATENCY_MS = 2000;
const DMA_CHUNK_BYTES = 64 * 1024;
const DMA_BO_BYTES = 64 * MiB;
const DMA_WINDOW = 16;
const STORE_BO_BYTES = 16 * MiB;
/** Stores written between two turns of the event loop (one store frame's worth). */
const STORES_PER_TURN = 16384;
const RSS_BO_BYTES = 256 * MiB;
const RSS_BO_COUNT = 4;

const NODE_CONFIG = {
  nodeId: "bench",
  device: { vramBytes: 4 * GiB, maxBoBytes: GiB },
  tenants: [{ ...TENANT, vramQuotaBytes: 3 * GiB, boQuota: 100_000 }],
};

interface Client {
  readonly session: Session;
  readonly context: number;
}

async function openClient(node: NodeProcess): Promise<Client> {
  const session = await Session.open({
    endpoint: node.guest,
    tenant: TENANT.name,
    token: TENANT.token,
  });
  return { session, context: await session.createContext() };
}

async function withClients<T>(
  node: NodeProcess,
  count: number,
  body: (clients: Client[]) => Promise<T>,
): Promise<T> {
  const clients = await Promise.all(Array.from({ length: count }, () => openClient(node)));
  try {
    return await body(clients);
  } finally {
    await Promise.all(clients.map((c) => c.session.close()));
  }
}

/** CPU used by this process and by the node over a stretch of wall time, in % of one core. */
class CpuMeter {
  private readonly node: NodeProcess;
  private wallMs = 0;
  private client = process.cpuUsage();
  private nodeSeconds = 0;

  constructor(node: NodeProcess) {
    this.node = node;
  }

  start(): void {
    this.wallMs = performance.now();
    this.client = process.cpuUsage();
    this.nodeSeconds = this.node.cpuSeconds();
  }

  stop(): { clientPct: number; nodePct: number } {
    const wallSeconds = (performance.now() - this.wallMs) / 1000;
    const used = process.cpuUsage(this.client);
    return {
      clientPct: ((used.user + used.system) / 1e6 / wallSeconds) * 100,
      nodePct: ((this.node.cpuSeconds() - this.nodeSeconds) / wallSeconds) * 100,
    };
  }
}

/**
 * Keeps `window` operations outstanding per client until the deadline; counts those completed
 * in the measured stretch after the warm-up.
 */
async function pipelined(
  node: NodeProcess,
  clients: readonly Client[],
  window: number,
  op: (c: Client, i: number) => Promise<unknown>,
) {
  const meter = new CpuMeter(node);
  const warmEnd = performance.now() + WARMUP_MS;
  const end = warmEnd + MEASURE_MS;
  let completed = 0;
  let cpu: { clientPct: number; nodePct: number } | undefined;
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
  return { perSecond: completed / (MEASURE_MS / 1000), ...cpu! };
}

function smallCalls(node: NodeProcess, sessions: number) {
  return withClients(node, sessions, (clients) =>
    pipelined(node, clients, CALL_WINDOW, (c) => c.session.fence(c.context)),
  );
}

/** One call outstanding at a time; microseconds per call. */
function latency(node: NodeProcess) {
  return withClients(node, 1, async ([c]) => {
    const { session, context } = c!;
    for (let i = 0; i < 500; i++) await session.fence(context);
    const samplesUs: number[] = [];
    const end = performance.now() + LATENCY_MS;
    for (let t = performance.now(); t < end; ) {
      await session.fence(context);
      const now = performance.now();
      samplesUs.push((now - t) * 1000);
      t = now;
    }
    return { p50: percentile(samplesUs, 50), p99: percentile(samplesUs, 99) };
  });
}

function dmaWrites(node: NodeProcess) {
  return withClients(node, 1, async ([c]) => {
    const { session, context } = c!;
    const bo = await session.allocBo(context, DMA_BO_BYTES);
    const data = new Uint8Array(DMA_CHUNK_BYTES).fill(0xa5);
    const slots = DMA_BO_BYTES / DMA_CHUNK_BYTES;
    const r = await pipelined(node, [c!], DMA_WINDOW, (_, i) =>
      session.dmaWrite(context, bo, (i % slots) * DMA_CHUNK_BYTES, data),
    );
    return { ...r, mbPerSecond: (r.perSecond * DMA_CHUNK_BYTES) / 1e6 };
  });
}

/** Sequential 4-byte stores for a while, then flush; stores per second until the flush resolved. */
function stores(node: NodeProcess) {
  return withClients(node, 1, async ([c]) => {
    const { session, context } = c!;
    const bo = await session.allocBo(context, STORE_BO_BYTES);
    const mapped = await session.map(context, bo, STORE_BO_BYTES);
    const words = STORE_BO_BYTES / 4;
    let next = 0;
    const writeFor = async (ms: number) => {
      const end = performance.now() + ms;
      let written = 0;
      while (performance.now() < end) {
        for (let i = 0; i < STORES_PER_TURN; i++, next = (next + 1) % words) {
          mapped.writeU32(next * 4, next);
        }
        written += STORES_PER_TURN;
        await yieldToLoop();
      }
      await mapped.flush();
      return written;
    };
    await writeFor(WARMUP_MS);
    const meter = new CpuMeter(node);
    meter.start();
    const started = performance.now();
    const written = await writeFor(MEASURE_MS);
    const seconds = (performance.now() - started) / 1000;
    return { perSecond: written / seconds, ...meter.stop() };
  });
}

/** RSS of a fresh node before and after 1 GiB of buffers is allocated and every page written. */
async function rssWithOneGiB(): Promise<{ before: number; after: number }> {
  const node = await startNode(NODE_CONFIG);
  try {
    await sleepMs(200);
    const before = node.rssMiB();
    const after = await withClients(node, 1, async ([c]) => {
      const { session, context } = c!;
      for (let i = 0; i < RSS_BO_COUNT; i++) {
        const bo = await session.allocBo(context, RSS_BO_BYTES);
        await session.launch(context, "fill", [buf(bo), u32(RSS_BO_BYTES / 4), u32(i + 1)]);
      }
      await session.fence(context);
      return node.rssMiB();
    });
    return { before, after };
  } finally {
    await node.stop();
  }
}

async function throughputs() {
  const node = await startNode(NODE_CONFIG);
  try {
    return {
      calls1: await smallCalls(node, 1),
      calls8: await smallCalls(node, 8),
      latency: await latency(node),
      dma: await dmaWrites(node),
      stores: await stores(node),
    };
  } finally {
    await node.stop();
  }
}

const cpuRows = (prefix: string, r: { clientPct: number; nodePct: number }): Metric[] => [
  { name: `${prefix}_node_cpu_pct`, value: r.nodePct, unit: "% of a core" },
  { name: `${prefix}_client_cpu_pct`, value: r.clientPct, unit: "% of a core" },
];

export async function runGuest(): Promise<void> {
  const t = await throughputs();
  const rss = await rssWithOneGiB();
  const metrics: Metric[] = [
    { name: "small_calls_per_s_1", value: t.calls1.perSecond, unit: "calls/s" },
    {
      name: "small_calls_per_s_8",
      value: t.calls8.perSecond,
      unit: "calls/s",
      target: { kind: "atLeast", value: 50_000 },
    },
    ...cpuRows("small_calls_8", t.calls8),
    { name: "call_latency_p50_us", value: t.latency.p50, unit: "us" },
    { name: "call_latency_p99_us", value: t.latency.p99, unit: "us" },
    { name: "dma_write_64k_mb_per_s", value: t.dma.mbPerSecond, unit: "MB/s (1e6 B)" },
    ...cpuRows("dma_write", t.dma),
    {
      name: "stores_per_s",
      value: t.stores.perSecond,
      unit: "stores/s",
      target: { kind: "atLeast", value: 1e6 },
    },
    ...cpuRows("stores", t.stores),
    { name: "rss_mb_before_bo", value: rss.before, unit: "MiB" },
    {
      name: "rss_mb_after_1gib_bo",
      value: rss.after,
      unit: "MiB",
      target: { kind: "atMost", value: 1.3 * 1024, note: "1.3 GiB" },
    },
  ];
  publish({
    name: "guest",
    metrics,
    notes: [
      `client and node share ${os.cpus().length} cores (separate processes, loopback gRPC)`,
      `throughputs: ${WARMUP_MS} ms warm-up, then ${MEASURE_MS} ms measured; small calls are fence, ${CALL_WINDOW} outstanding per session; DMA ${DMA_CHUNK_BYTES / 1024} KiB writes, ${DMA_WINDOW} outstanding`,
      `latency: one fence outstanding at a time for ${LATENCY_MS} ms`,
      `stores: sequential writeU32 into a ${STORE_BO_BYTES / MiB} MiB mapped buffer, timed until flush() resolved`,
      `rss: fresh node, ${RSS_BO_COUNT} x ${RSS_BO_BYTES / MiB} MiB buffers each filled by the fill kernel, VmRSS of the node`,
    ],
  });
}
