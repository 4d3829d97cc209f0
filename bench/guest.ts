// Guest benchmark against a real vgpud over loopback: pipelined small calls from 1 and 8
// sessions, sequential call latency, 64 KiB DMA writes, MMIO stores through a mapped buffer,
// and the node's RSS with 1 GiB of buffers written. Client and node are separate processes
// sharing this machine's cores; the CPU each used is reported beside the throughputs.
import os from "node:os";
import { performance } from "node:perf_hooks";
import { buf, u32 } from "@vgpu-ha/client";
import {
  BENCH_TENANT,
  CALL_WINDOW,
  CpuMeter,
  type CpuUse,
  DMA_CHUNK_BYTES,
  DMA_WINDOW,
  dmaWrites,
  latency,
  smallCalls,
  withClients,
} from "./guest-workload.js";
import { type NodeProcess, startNode } from "./node-process.js";
import { type Metric, publish } from "./report.js";
import { sleepMs, yieldToLoop } from "./timing.js";

const MiB = 2 ** 20;
const GiB = 2 ** 30;

const DURATIONS = { warmupMs: 500, measureMs: 3000 };
const LATENCY_MS = 2000;
const STORE_BO_BYTES = 16 * MiB;
/** Stores written between two turns of the event loop (one store frame's worth). */
const STORES_PER_TURN = 16384;
const RSS_BO_BYTES = 256 * MiB;
const RSS_BO_COUNT = 4;

const NODE_CONFIG = {
  nodeId: "bench",
  device: { vramBytes: 4 * GiB, maxBoBytes: GiB },
  tenants: [{ ...BENCH_TENANT, vramQuotaBytes: 3 * GiB, boQuota: 100_000 }],
};

/** Sequential 4-byte stores for a while, then flush; stores per second until the flush resolved. */
function stores(node: NodeProcess) {
  return withClients(node.guest, 1, async ([c]) => {
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
    await writeFor(DURATIONS.warmupMs);
    const meter = new CpuMeter([node]);
    meter.start();
    const started = performance.now();
    const written = await writeFor(DURATIONS.measureMs);
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
    const after = await withClients(node.guest, 1, async ([c]) => {
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
    const nodes = [node];
    return {
      calls1: await smallCalls(node.guest, nodes, 1, DURATIONS),
      calls8: await smallCalls(node.guest, nodes, 8, DURATIONS),
      latency: await latency(node.guest, LATENCY_MS),
      dma: await dmaWrites(node.guest, nodes, DURATIONS),
      stores: await stores(node),
    };
  } finally {
    await node.stop();
  }
}

const cpuRows = (prefix: string, r: CpuUse): Metric[] => [
  { name: `${prefix}_node_cpu_pct`, value: r.nodePcts[0]!, unit: "% of a core" },
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
      `throughputs: ${DURATIONS.warmupMs} ms warm-up, then ${DURATIONS.measureMs} ms measured; small calls are fence, ${CALL_WINDOW} outstanding per session; DMA ${DMA_CHUNK_BYTES / 1024} KiB writes, ${DMA_WINDOW} outstanding`,
      `latency: one fence outstanding at a time for ${LATENCY_MS} ms`,
      `stores: sequential writeU32 into a ${STORE_BO_BYTES / MiB} MiB mapped buffer, timed until flush() resolved`,
      `rss: fresh node, ${RSS_BO_COUNT} x ${RSS_BO_BYTES / MiB} MiB buffers each filled by the fill kernel, VmRSS of the node`,
    ],
  });
}
