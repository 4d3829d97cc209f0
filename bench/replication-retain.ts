// The retained log's heap at its cap (in process): a primary's Backend, Sequencer and
// ReplicationLog take small calls (fence, the guest benchmark's small call) from 8 sessions,
// each frame decoded from its wire form as the guest service does, and release everything
// after every 1024 frames as if the standby applied it at once, so the log holds only the
// entries `retainBytes` keeps. Once the log has dropped entries for a while, the heap growth
// over the state before the first call (both after a full GC) is what retention costs. Heap
// here is the JS heap plus the memory of ArrayBuffers (the retained log's slabs live there, not
// in heapUsed).
import v8 from "node:v8";
import vm from "node:vm";
import { decodeFrame, encodeFrame, type Frame, ReplicationLog } from "@vgpu-ha/common";
import { Backend } from "@vgpu-ha/gpu-model";
import { Sequencer } from "@vgpu-ha/primary";
import type { Metric } from "./report.js";

const MiB = 2 ** 20;
const GiB = 2 ** 30;
/** The default replication.retainBytes. */
const RETAIN_BYTES = 64 * MiB;
const SESSIONS = 8;
const RELEASE_EVERY_FRAMES = 1024;
/** Frames run after the log first drops an entry, as a share of what it then holds. */
const AT_CAP_SHARE = 0.25;

export const RETAIN_NOTE = `retain: in process, fence calls from ${SESSIONS} sessions decoded from wire frames through Backend + Sequencer + ReplicationLog, everything released every ${RELEASE_EVERY_FRAMES} frames with retainBytes ${RETAIN_BYTES / MiB} MiB; heap growth (heapUsed + arrayBuffers after a full GC, before the first call and once the log had dropped entries for another ${AT_CAP_SHARE * 100} % of what it held)`;

/** The JS heap and the ArrayBuffers' memory (typed arrays' bytes live outside heapUsed). */
function heapBytes(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

export interface RetainResult {
  readonly budgetMb: number;
  readonly heapMbAtCap: number;
  readonly entriesAtCap: number;
  readonly framesRun: number;
  readonly heapBytesPerEntry: number;
  /** What the log counts against retainBytes (its slabs' capacities). */
  readonly slabMb: number;
}

function collectGarbage(): () => void {
  v8.setFlagsFromString("--expose-gc");
  return vm.runInNewContext("gc") as () => void;
}

export function measureRetain(): RetainResult {
  const gc = collectGarbage();
  const backend = new Backend({
    device: { seed: 1, vramBytes: GiB, maxBoBytes: GiB, maxKernelWork: 2 ** 31 },
    tenants: new Map([["bench", { vramBytes: GiB, bos: 1000 }]]),
    session: { replyCacheFrames: 4096, replyCacheBytes: 64 * MiB },
    maxDmaBytes: MiB,
    maxStoresPerBatch: 65536,
    trackMmio: true,
  });
  const log = new ReplicationLog();
  const sequencer = new Sequencer(backend, log, { mmio: "per-page", flushBytes: MiB }, () => 0);
  const sessions = Array.from({ length: SESSIONS }, (_, i) => {
    const record = sequencer.openSession(`00000000-0000-4000-8000-00000000000${i}`, "bench");
    if ("code" in record) throw new Error(record.message);
    return { record, frame: 0, context: 0 };
  });
  const apply = (s: (typeof sessions)[number], body: Frame["body"]) => {
    const frame = decodeFrame(encodeFrame({ number: ++s.frame, body }));
    if (frame instanceof Error) throw frame;
    return sequencer.applyFrame(s.record, frame).outcome.result;
  };
  for (const s of sessions) {
    const out = apply(s, { kind: "call", call: { op: "contextCreate" } }).output;
    if (out.kind !== "handle") throw new Error("contextCreate: no handle");
    s.context = out.handle;
  }
  log.release(log.lastSeq, RETAIN_BYTES);
  gc();
  const heapBefore = heapBytes();
  let frames = 0;
  let stopAt = Number.POSITIVE_INFINITY;
  while (frames < stopAt) {
    for (let i = 0; i < RELEASE_EVERY_FRAMES; i++, frames++) {
      const s = sessions[frames % SESSIONS]!;
      apply(s, { kind: "call", call: { op: "fence", context: s.context } });
    }
    log.release(log.lastSeq, RETAIN_BYTES);
    if (stopAt === Number.POSITIVE_INFINITY && log.firstRetainedSeq > 1) {
      stopAt = frames + Math.ceil(log.heldEntries * AT_CAP_SHARE);
    }
  }
  gc();
  const grown = heapBytes() - heapBefore;
  return {
    budgetMb: RETAIN_BYTES / MiB,
    heapMbAtCap: grown / MiB,
    entriesAtCap: log.heldEntries,
    framesRun: frames,
    heapBytesPerEntry: grown / log.heldEntries,
    slabMb: log.retainedHeapBytes / MiB,
  };
}

export function retainMetrics(r: RetainResult): Metric[] {
  return [
    { name: "retain_budget_mb", value: r.budgetMb, unit: "MiB (replication.retainBytes)" },
    {
      name: "retain_heap_mb_at_cap",
      value: r.heapMbAtCap,
      unit: "MiB heap growth",
      target: { kind: "atMost", value: 1.5 * r.budgetMb, note: "1.5 x retain_budget_mb" },
    },
    { name: "retain_entries_at_cap", value: r.entriesAtCap, unit: "entries" },
    { name: "retain_heap_bytes_per_entry", value: r.heapBytesPerEntry, unit: "B" },
    { name: "retain_slab_mb", value: r.slabMb, unit: "MiB counted by the log (its slabs)" },
  ];
}
