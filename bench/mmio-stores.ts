// MMIO store streams through a mapped buffer, and what one stream costs the replication:
// entries sent (from the primary's /metrics), real bytes on the wire (from the counting
// proxy) and stores per second until flush() resolved — in sync mode that is once the
// standby applied every store and the replies were released.
import { performance } from "node:perf_hooks";
import type { MappedBuffer } from "@vgpu-ha/client";
import type { Cluster } from "./cluster.js";
import type { WireCounts } from "./counting-proxy.js";
import { type Samples, sampleSum, scrape } from "./ops-client.js";
import { yieldToLoop } from "./timing.js";

/** Stores written between two turns of the event loop (one store frame's worth). */
const STORES_PER_TURN = 16384;
const MMIO_KINDS = ["mmioPages", "mmioStore"] as const;

/** A fixed sequence of 4-byte stores: the same for every mode measured. */
export interface StoreStream {
  readonly name: string;
  readonly description: string;
  readonly stores: number;
  /** Byte offset of store i. */
  offset(i: number): number;
}

export function sequentialStores(spanBytes: number): StoreStream {
  return {
    name: `seq_${spanBytes / 2 ** 20}m`,
    description: `sequential 4-byte stores over ${spanBytes / 2 ** 20} MiB`,
    stores: spanBytes / 4,
    offset: (i) => i * 4,
  };
}

/** `stores` 4-byte stores at word offsets drawn from xorshift32(seed) within `spanBytes`. */
export function randomStores(spanBytes: number, stores: number, seed: number): StoreStream {
  const offsets = new Uint32Array(stores);
  const words = spanBytes / 4;
  let x = seed >>> 0 || 1;
  for (let i = 0; i < stores; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    offsets[i] = (x % words) * 4;
  }
  return {
    name: `random_${spanBytes / 2 ** 20}m`,
    description: `${stores} random 4-byte stores within ${spanBytes / 2 ** 20} MiB (xorshift32 seed ${seed})`,
    stores,
    offset: (i) => offsets[i]!,
  };
}

export interface StreamCost {
  readonly stores: number;
  readonly seconds: number;
  readonly storesPerSecond: number;
  /** Log entries of the MMIO kinds sent to the standby. */
  readonly entries: number;
  /** The primary's estimate of those entries' bytes. */
  readonly entryBytes: number;
  /** Store bytes shipped (written extents, or single stores). */
  readonly shippedBytes: number;
  readonly pageBatches: number;
  /** Bytes on the wire primary → standby and back, heartbeats included. */
  readonly wireUp: number;
  readonly wireDown: number;
}

interface Reading {
  readonly samples: Samples;
  readonly wire: WireCounts;
}

async function read(cluster: Cluster): Promise<Reading> {
  const [samples, wire] = await Promise.all([scrape(cluster.primary), cluster.proxy!.counts()]);
  return { samples, wire };
}

function mmioSum(s: Samples, name: string): number {
  return MMIO_KINDS.reduce((sum, kind) => sum + sampleSum(s, name, { kind }), 0);
}

/** Writes `stream` into `mapped` and flushes; what it cost. */
export async function measureStream(
  cluster: Cluster,
  mapped: MappedBuffer,
  stream: StoreStream,
): Promise<StreamCost> {
  const before = await read(cluster);
  const started = performance.now();
  await writeStream(mapped, stream);
  const seconds = (performance.now() - started) / 1000;
  const after = await read(cluster);
  const delta = (name: string) => sampleSum(after.samples, name) - sampleSum(before.samples, name);
  return {
    stores: stream.stores,
    seconds,
    storesPerSecond: stream.stores / seconds,
    entries:
      mmioSum(after.samples, "vgpu_replication_entries_total") -
      mmioSum(before.samples, "vgpu_replication_entries_total"),
    entryBytes:
      mmioSum(after.samples, "vgpu_replication_bytes_total") -
      mmioSum(before.samples, "vgpu_replication_bytes_total"),
    shippedBytes: delta("vgpu_mmio_shipped_bytes_total"),
    pageBatches: delta("vgpu_mmio_page_batches_total"),
    wireUp: after.wire.up - before.wire.up,
    wireDown: after.wire.down - before.wire.down,
  };
}

export async function writeStream(mapped: MappedBuffer, stream: StoreStream): Promise<void> {
  for (let i = 0; i < stream.stores; ) {
    const end = Math.min(stream.stores, i + STORES_PER_TURN);
    for (; i < end; i++) mapped.writeU32(stream.offset(i), Math.imul(i, 0x9e3779b1) >>> 0 || 1);
    await yieldToLoop();
  }
  await mapped.flush();
}
