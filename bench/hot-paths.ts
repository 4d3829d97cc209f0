// In-process costs of the per-call hot paths, side by side with another build of the project
// in the same run: BENCH_BEFORE=DIR (a worktree of the previous commit, built) loads the same
// modules from DIR and the two builds alternate round by round. Without it, only this build.
//   gemm         gemm_f32 512³ through Backend.applyFrame: GFLOP/s by CPU time of this process
//                (wall-clock figures lie on a shared machine: the process waits for a core)
//   calls        fence frames through Backend.applyFrame from 8 sessions (reply cache 4096)
//   entries      a primary's entry batch of 256 small calls: encodePrimaryMessage + toBinary,
//                and fromBinary + decodePrimaryMessage (what the standby does), per entry
//   metrics      the per-call metrics: prom-client Counter.inc x2 + Histogram.observe (the
//                previous way) against CallStats (this build), per call
//   guest        a standalone primary's whole per-frame work without gRPC (hot-paths-guest.ts):
//                fence frames and 64 KiB dmaWrites decoded, served and answered
// Values are medians over rounds; CPU time is process.cpuUsage (user + system).
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Counter, Histogram, Registry } from "prom-client";
import { floats } from "./gpu-model.js";
import {
  type GuestBuild,
  guestDmaEncodeRound,
  guestDmaRound,
  guestFencesRound,
} from "./hot-paths-guest.js";
import { type Metric, publish } from "./report.js";
import { median } from "./timing.js";

const ROUNDS = 7;
const GEMM_SIZE = 512;
const CALLS_PER_ROUND = 200_000;
const SESSIONS = 8;
const BATCH_ENTRIES = 256;
const BATCHES_PER_ROUND = 400;
const METRIC_CALLS_PER_ROUND = 500_000;

type Common = typeof import("@vgpu-ha/common");
type GpuModel = typeof import("@vgpu-ha/gpu-model");

interface Build extends GuestBuild {
  readonly name: string;
  readonly common: Common;
  readonly gpu: GpuModel;
}

async function loadBuild(name: string, root: string | undefined): Promise<Build> {
  if (root === undefined) {
    return {
      name,
      common: await import("@vgpu-ha/common"),
      gpu: await import("@vgpu-ha/gpu-model"),
      primary: await import("@vgpu-ha/primary/testing"),
      protobuf: await import("@bufbuild/protobuf"),
    };
  }
  const at = (p: string) => pathToFileURL(path.resolve(root, p)).href;
  return {
    name,
    common: (await import(at("packages/common/dist/index.js"))) as Common,
    gpu: (await import(at("packages/gpu-model/dist/index.js"))) as GpuModel,
    primary: (await import(
      at("packages/primary/dist/testing/guest-harness.js")
    )) as GuestBuild["primary"],
    protobuf: (await import(
      at("node_modules/@bufbuild/protobuf/dist/esm/index.js")
    )) as GuestBuild["protobuf"],
  };
}

/** CPU seconds of this process while `run` runs. */
function cpuSeconds(run: () => void): number {
  const start = process.cpuUsage();
  run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}

const GiB = 2 ** 30;

function backendOf(b: Build) {
  return new b.gpu.Backend({
    device: { seed: 1, vramBytes: GiB, maxBoBytes: GiB, maxKernelWork: 2 ** 31 },
    tenants: new Map([["bench", { vramBytes: GiB, bos: 1000 }]]),
    session: { replyCacheFrames: 4096, replyCacheBytes: 64 * 2 ** 20 },
    maxDmaBytes: 2 ** 24,
    maxStoresPerBatch: 65536,
    trackMmio: true,
  });
}

type Backend = ReturnType<typeof backendOf>;
type SessionRecord = Exclude<
  ReturnType<Backend["openSession"]>,
  { code: unknown; message: string }
>;

function guest(backend: Backend, id: string) {
  const session = backend.openSession(id, "bench") as SessionRecord;
  let frame = 0;
  const call = (c: Parameters<Backend["execute"]>[1]) => {
    const out = backend.applyFrame(session, { number: ++frame, body: { kind: "call", call: c } });
    if (out.result.code !== 0) throw new Error(`${c.op}: ${out.result.message}`);
    return out.result.output;
  };
  const ctx = call({ op: "contextCreate" });
  if (ctx.kind !== "handle") throw new Error("no context");
  return { call, context: ctx.handle };
}

/** One gemm round: GFLOP/s by CPU time. */
function gemmRound(b: Build): () => number {
  const g = guest(backendOf(b), "gemm");
  const s = GEMM_SIZE;
  const bo = () => {
    const out = g.call({ op: "boAlloc", context: g.context, sizeBytes: s * s * 4 });
    return out.kind === "handle" ? out.handle : 0;
  };
  const [a, bb, c] = [bo(), bo(), bo()];
  g.call({ op: "dmaWrite", context: g.context, bo: a, offset: 0, data: floats(s * s, 1) });
  g.call({ op: "dmaWrite", context: g.context, bo: bb, offset: 0, data: floats(s * s, 2) });
  const buf = (x: number) => ({ kind: "buffer" as const, bo: x });
  const u32 = (value: number) => ({ kind: "u32" as const, value });
  const launch = () =>
    g.call({
      op: "kernelLaunch",
      context: g.context,
      kernel: "gemm_f32",
      args: [buf(c), buf(a), buf(bb), u32(s), u32(s), u32(s)],
    });
  launch();
  return () => (2 * s ** 3) / cpuSeconds(launch) / 1e9;
}

/** One round of fence calls: CPU µs per call. */
function callsRound(b: Build): () => number {
  const backend = backendOf(b);
  const guests = Array.from({ length: SESSIONS }, (_, i) => guest(backend, `s${i}`));
  const run = (n: number) => {
    for (let i = 0; i < n; i++) {
      const g = guests[i % SESSIONS]!;
      g.call({ op: "fence", context: g.context });
    }
  };
  run(SESSIONS * 5000); // fills every reply cache (4096 frames each)
  return () => (cpuSeconds(() => run(CALLS_PER_ROUND)) / CALLS_PER_ROUND) * 1e6;
}

function smallCallEntries(b: Build) {
  const entries = [];
  for (let i = 0; i < BATCH_ENTRIES; i++) {
    entries.push({
      seq: 1_000_000 + i,
      body: {
        kind: "call" as const,
        sessionId: `0b7c6f1e-5d4a-4c1b-9a43-3e2f1d0c9b8${i % SESSIONS}`,
        frame: 5000 + i,
        call: { op: "fence" as const, context: 1 },
        handles: b.common.EMPTY_DELTA,
        result: { code: 0, outputDigest: new Uint8Array(9).fill(3) },
      },
    });
  }
  return { kind: "entries" as const, epoch: 3, entries };
}

/** Encode and decode µs per entry, and wire bytes per entry. */
function entriesRound(b: Build): () => { encodeUs: number; decodeUs: number; bytes: number } {
  const { encodePrimaryMessage, decodePrimaryMessage, wire } = b.common;
  const { fromBinary, toBinary } = b.protobuf; // the build's own (see hot-paths-guest.ts)
  const message = smallCallEntries(b);
  const bytes = toBinary(wire.PrimaryMessageSchema, encodePrimaryMessage(message));
  const n = BATCHES_PER_ROUND * BATCH_ENTRIES;
  return () => {
    const encode = cpuSeconds(() => {
      for (let i = 0; i < BATCHES_PER_ROUND; i++) {
        toBinary(wire.PrimaryMessageSchema, encodePrimaryMessage(message));
      }
    });
    const decode = cpuSeconds(() => {
      for (let i = 0; i < BATCHES_PER_ROUND; i++) {
        decodePrimaryMessage(fromBinary(wire.PrimaryMessageSchema, bytes));
      }
    });
    return {
      encodeUs: (encode / n) * 1e6,
      decodeUs: (decode / n) * 1e6,
      bytes: bytes.byteLength / BATCH_ENTRIES,
    };
  };
}

/** µs per call of the previous per-call metrics (prom-client) and of CallStats. */
function metricsRound(b: Build): () => { promClientUs: number; callStatsUs: number } {
  const registry = new Registry();
  const registers = [registry];
  const frames = new Counter({ name: "f_total", help: "f", labelNames: ["outcome"], registers });
  const calls = new Counter({ name: "c_total", help: "c", labelNames: ["op", "code"], registers });
  const duration = new Histogram({
    name: "d_seconds",
    help: "d",
    labelNames: ["op"],
    buckets: [1e-6, 5e-6, 2e-5, 1e-4, 5e-4, 2e-3, 1e-2, 5e-2, 0.25, 1],
    registers,
  });
  const frame = frames.labels({ outcome: "applied" });
  const call = calls.labels({ op: "fence", code: "OK" });
  const dur = duration.labels({ op: "fence" });
  const stats = new b.common.CallStats();
  const n = METRIC_CALLS_PER_ROUND;
  return () => ({
    promClientUs:
      (cpuSeconds(() => {
        for (let i = 0; i < n; i++) {
          frame.inc();
          call.inc();
          dur.observe(3e-6 + (i & 7) * 1e-6);
        }
      }) /
        n) *
      1e6,
    callStatsUs:
      (cpuSeconds(() => {
        for (let i = 0; i < n; i++) {
          stats.frame("applied").count++;
          stats.call("fence", "OK").count++;
          stats.duration("fence").observe(3e-6 + (i & 7) * 1e-6);
        }
      }) /
        n) *
      1e6,
  });
}

export async function runHotPaths(): Promise<void> {
  const root = process.env.BENCH_BEFORE;
  const builds = [await loadBuild("this", undefined)];
  if (root) builds.push(await loadBuild("before", root));
  const gemm = builds.map(gemmRound);
  const calls = builds.map(callsRound);
  const entries = builds.map(entriesRound);
  const guestFences = await Promise.all(builds.map(guestFencesRound));
  const guestDma = await Promise.all(builds.map(guestDmaRound));
  const results = builds.map(() => ({
    gemm: [] as number[],
    calls: [] as number[],
    encode: [] as number[],
    decode: [] as number[],
    bytes: 0,
    guestFence: [] as number[],
    guestDma: [] as number[],
  }));
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate which build goes first.
    const order = round % 2 === 0 ? builds.map((_, i) => i) : builds.map((_, i) => i).reverse();
    for (const i of order) {
      const r = results[i]!;
      r.gemm.push(gemm[i]!());
      r.calls.push(calls[i]!());
      const e = entries[i]!();
      r.encode.push(e.encodeUs);
      r.decode.push(e.decodeUs);
      r.bytes = e.bytes;
      r.guestFence.push(await guestFences[i]!());
      r.guestDma.push(await guestDma[i]!());
    }
  }
  const metricsRun = metricsRound(builds[0]!);
  const encodeRun = guestDmaEncodeRound(builds[0]!);
  const promClient: number[] = [];
  const callStats: number[] = [];
  const dmaEncode: number[] = [];
  const dmaToBinary: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const m = metricsRun();
    promClient.push(m.promClientUs);
    callStats.push(m.callStatsUs);
    const e = encodeRun();
    dmaEncode.push(e.leanUs);
    dmaToBinary.push(e.toBinaryUs);
  }
  const metrics: Metric[] = [];
  builds.forEach((b, i) => {
    const r = results[i]!;
    const p = b.name === "this" ? "" : `${b.name}_`;
    metrics.push(
      { name: `${p}gemm_gflops_cpu`, value: median(r.gemm), unit: "GFLOP/s per CPU second" },
      { name: `${p}fence_call_cpu_us`, value: median(r.calls), unit: "µs CPU per applyFrame" },
      { name: `${p}entry_encode_cpu_us`, value: median(r.encode), unit: "µs CPU per entry" },
      { name: `${p}entry_decode_cpu_us`, value: median(r.decode), unit: "µs CPU per entry" },
      { name: `${p}entry_wire_bytes`, value: r.bytes, unit: "B per small-call entry" },
      {
        name: `${p}guest_fence_frame_cpu_us`,
        value: median(r.guestFence),
        unit: "µs CPU per fence frame (decode, serve, answer; no gRPC)",
      },
      {
        name: `${p}guest_dma_write_64k_cpu_us`,
        value: median(r.guestDma),
        unit: "µs CPU per 64 KiB dmaWrite frame (decode, serve, answer; no gRPC)",
      },
    );
  });
  metrics.push(
    { name: "metrics_prom_client_us", value: median(promClient), unit: "µs CPU per call" },
    { name: "metrics_call_stats_us", value: median(callStats), unit: "µs CPU per call" },
    {
      name: "guest_dma_encode_64k_cpu_us",
      value: median(dmaEncode),
      unit: "µs CPU per 64 KiB dmaWrite message, the guest library's encoder (encodeGuestFrames)",
    },
    {
      name: "guest_dma_encode_64k_tobinary_cpu_us",
      value: median(dmaToBinary),
      unit: "µs CPU per 64 KiB dmaWrite message, protobuf-es toBinary (the library before #15)",
    },
  );
  const ratios: Record<string, number> = {
    metrics_call_stats_over_prom_client: median(callStats) / median(promClient),
    guest_dma_encode_over_tobinary: median(dmaEncode) / median(dmaToBinary),
  };
  if (builds.length === 2) {
    const [now, before] = results as [(typeof results)[0], (typeof results)[0]];
    ratios.gemm_over_before = median(now.gemm) / median(before.gemm);
    ratios.fence_call_over_before = median(now.calls) / median(before.calls);
    ratios.entry_encode_over_before = median(now.encode) / median(before.encode);
    ratios.entry_decode_over_before = median(now.decode) / median(before.decode);
    ratios.guest_fence_frame_over_before = median(now.guestFence) / median(before.guestFence);
    ratios.guest_dma_write_64k_over_before = median(now.guestDma) / median(before.guestDma);
  }
  publish({
    name: "hot-paths",
    metrics,
    ratios,
    notes: [
      `in process; ${ROUNDS} rounds, builds alternating (BENCH_BEFORE=${root ?? "unset"}); medians; CPU time of this process (process.cpuUsage), so a busy machine slows the wall clock, not the figures`,
      "guest: a standalone primary's GuestService, sequencer and backend (inline device) in process, guest messages decoded from bytes and replies encoded, as gRPC's (de)serializers do; fences: 8 sessions x 64-frame messages; dma: one session, 64 KiB dmaWrites 16 at a time",
      `gemm_f32 ${GEMM_SIZE}^3; fence calls ${CALLS_PER_ROUND} per round from ${SESSIONS} sessions after their reply caches (4096) are full; entries: batches of ${BATCH_ENTRIES} fence-call entries, ${BATCHES_PER_ROUND} per round; metrics: ${METRIC_CALLS_PER_ROUND} calls per round`,
    ],
  });
}
