// per-store vs per-page MMIO replication, side by side: two sync pairs, each dialling its
// standby through a byte-counting proxy, write the same store streams through a mapped
// buffer; entries, real bytes on the wire and stores/s for each.
import { startPair } from "./cluster.js";
import { profilePhase } from "./cpu-profile.js";
import { openClient } from "./guest-workload.js";
import {
  measureStream,
  randomStores,
  type StoreStream,
  type StreamCost,
  sequentialStores,
  writeStream,
} from "./mmio-stores.js";
import type { Metric } from "./report.js";
import { sleepMs } from "./timing.js";

const MiB = 2 ** 20;
const MMIO_BO_BYTES = 64 * MiB;
/** Both MMIO modes write this sequential span; per-page also writes all of MMIO_BO_BYTES. */
const MMIO_SEQ_BYTES = 4 * MiB;
const MMIO_RANDOM_SPAN_BYTES = MiB;
const MMIO_RANDOM_STORES = 256 * 1024;
const MMIO_WARMUP_STORES = 65536;
const WIRE_IDLE_MS = 1000;
/**
 * A longer peer lease than the product's 500 ms: one per-store frame of 16384 stores becomes
 * 16384 entries, and the primary encodes and sends what it has in one turn of its event loop
 * (measured 420-870 ms on this machine), long enough for the standby to promote itself.
 * The comparison is about replication cost, so the pairs must stay pairs.
 */
export const MMIO_LEASE = { durationMs: 5000, heartbeatMs: 100, driftMarginMs: 150 };

export type MmioMode = "per_store" | "per_page";
type MmioResult = Record<string, StreamCost & { wireIdleBytesPerSecond: number }>;

/** Both modes, the streams described; metrics and the raw results. */
export async function measureMmioModes(profiles: string[]) {
  const seq = sequentialStores(MMIO_SEQ_BYTES);
  const random = randomStores(MMIO_RANDOM_SPAN_BYTES, MMIO_RANDOM_STORES, 12345);
  const full = sequentialStores(MMIO_BO_BYTES);
  const results = {
    per_store: await measureMmio("per_store", [seq, random], profiles),
    per_page: await measureMmio("per_page", [seq, random, full], profiles),
  };
  return {
    metrics: mmioMetrics(results, seq, random, full),
    data: {
      streams: [seq, random, full].map((s) => ({ name: s.name, description: s.description })),
      results,
    },
  };
}

async function measureMmio(
  mode: MmioMode,
  streams: readonly StoreStream[],
  profiles: string[],
): Promise<MmioResult> {
  const cluster = await startPair({
    label: `mmio-${mode}`,
    mode: "sync",
    mmio: mode === "per_store" ? "per-store" : "per-page",
    countWire: true,
    lease: MMIO_LEASE,
  });
  try {
    const idle0 = await cluster.proxy!.counts();
    await sleepMs(WIRE_IDLE_MS);
    const idle1 = await cluster.proxy!.counts();
    const wireIdleBytesPerSecond =
      (idle1.up + idle1.down - idle0.up - idle0.down) / (WIRE_IDLE_MS / 1000);
    const { session, context } = await openClient(cluster.primary.guest);
    try {
      const bo = await session.allocBo(context, MMIO_BO_BYTES);
      const mapped = await session.map(context, bo, MMIO_BO_BYTES);
      const warm = await profilePhase(cluster.nodes, "mmio-warmup", () =>
        writeStream(mapped, randomStores(MMIO_BO_BYTES, MMIO_WARMUP_STORES, 7)),
      );
      profiles.push(...warm.profiles);
      const out: MmioResult = {};
      for (const stream of streams) {
        const r = await profilePhase(cluster.nodes, `mmio-${stream.name}`, () =>
          measureStream(cluster, mapped, stream),
        );
        profiles.push(...r.profiles);
        out[stream.name] = { ...r.result, wireIdleBytesPerSecond };
        console.log(
          `  ${mode} ${stream.name}: ${r.result.entries} entries, ${Math.round(r.result.storesPerSecond)} stores/s`,
        );
      }
      return out;
    } finally {
      await session.close();
    }
  } finally {
    await cluster.stop();
  }
}

function mmioMetrics(
  results: Record<MmioMode, MmioResult>,
  seq: StoreStream,
  random: StoreStream,
  full: StoreStream,
): Metric[] {
  const out: Metric[] = [];
  for (const mode of ["per_store", "per_page"] as const) {
    for (const [stream, r] of Object.entries(results[mode])) {
      const p = `mmio_${mode}_${stream}`;
      out.push(
        { name: `${p}_entries`, value: r.entries, unit: "entries" },
        { name: `${p}_wire_bytes`, value: r.wireUp, unit: "B primary→standby" },
        { name: `${p}_stores_per_s`, value: r.storesPerSecond, unit: "stores/s" },
      );
    }
  }
  const scale = full.stores / seq.stores;
  const perStoreSeq = results.per_store[seq.name]!;
  out.push(
    {
      name: `mmio_per_store_${full.name}_entries_scaled`,
      value: perStoreSeq.entries * scale,
      unit: `entries (${seq.name} x ${scale})`,
    },
    {
      name: `mmio_per_store_${full.name}_wire_bytes_scaled`,
      value: perStoreSeq.wireUp * scale,
      unit: `B (${seq.name} x ${scale})`,
    },
  );
  const perPageSeq = results.per_page[seq.name]!;
  const perStoreRandom = results.per_store[random.name]!;
  const perPageRandom = results.per_page[random.name]!;
  out.push(
    {
      name: `mmio_${seq.name}_entries_per_store_over_per_page`,
      value: perStoreSeq.entries / perPageSeq.entries,
      unit: "ratio",
      target: { kind: "atLeast", value: 20 },
    },
    {
      name: `mmio_${seq.name}_stores_per_s_per_page_over_per_store`,
      value: perPageSeq.storesPerSecond / perStoreSeq.storesPerSecond,
      unit: "ratio",
      target: { kind: "atLeast", value: 5 },
    },
    {
      name: `mmio_${seq.name}_wire_bytes_per_store_over_per_page`,
      value: perStoreSeq.wireUp / perPageSeq.wireUp,
      unit: "ratio",
    },
    {
      name: `mmio_${random.name}_entries_per_store_over_per_page`,
      value: perStoreRandom.entries / perPageRandom.entries,
      unit: "ratio",
    },
    {
      name: `mmio_${random.name}_stores_per_s_per_page_over_per_store`,
      value: perPageRandom.storesPerSecond / perStoreRandom.storesPerSecond,
      unit: "ratio",
    },
  );
  return out;
}

export const MMIO_NOTE = `mmio: sync pairs through a byte-counting TCP proxy (own process), peer lease ${MMIO_LEASE.durationMs} ms instead of the default 500 ms (per-store bursts otherwise make the standby promote itself; see data.leaseEvents); per-store and per-page write the same streams through MappedBuffer.writeU32 (16384 stores per event-loop turn), stores_per_s until flush() resolved (sync: after the standby applied them); entries = delta of vgpu_replication_entries_total{kind=mmioPages|mmioStore}; wire_bytes = proxy bytes primary→standby during the stream (heartbeats included; idle wire rate in data.mmio); per-store over 64 MiB (16 Mi entries) would take minutes, so both modes write ${MMIO_SEQ_BYTES / MiB} MiB sequentially (the target ratios) and per-page also the whole 64 MiB; per_store entries for 64 MiB are scaled x${MMIO_BO_BYTES / MMIO_SEQ_BYTES} (exact: one entry per store)`;
