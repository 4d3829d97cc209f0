// What a fresh replica's VRAM costs the thread that writes a snapshot's pages into it, in
// process (issue #15): a device on its own thread (the WorkerExecutor the standby runs), one
// buffer allocated as a restored snapshot allocates it, then 1 MiB page writes whose bytes are
// moved to the device thread (as a pulled chunk's are), submitted at a steady rate. Three ways,
// alternated round by round:
//   fresh      the buffer's pages are first touched by the device thread's writes;
//   prefault   Device.prefault first (a toucher thread touches each page ahead of the writes,
//              whatever the cores: prefaultMinCores 1);
//   reused     the same writes a second time into the same, already mapped, buffer.
// Figures are CPU ms per MiB and minor page faults per 4 KiB page written, from
// /proc/self/task (10 ms ticks) and getrusage: the busiest thread other than the main one (the
// device thread), the threads that ended meanwhile (the toucher, which ends once every page is
// touched), the main thread, the whole process; and the wall time to write all pages. Medians
// over rounds.
//   npm run bench -- snapshot-prefault      (BENCH_PREFAULT_MIB: buffer size, default 256)
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { Device, PAGE_SIZE_BYTES } from "@vgpu-ha/gpu-model";
import { workerExecutor } from "@vgpu-ha/gpu-model/worker";
import { type ThreadStat, threadStats } from "./node-process.js";
import { type Metric, publish } from "./report.js";
import { median } from "./timing.js";

const MiB = 2 ** 20;
const ROUNDS = 3;
/** The pull's rate on the quiet host (about 1.1-1.3 GB/s at 1 GiB): one chunk per 0.8 ms. */
const CHUNK_EVERY_MS = 0.8;
/** The main thread submits what is due this often. */
const PACE_MS = 2;
/** Between the restore and the first pages chunk (the pull's connection and hello). */
const START_GAP_MS = 20;

type Way = "fresh" | "prefault" | "reused";

interface Round {
  readonly wallMs: number;
  /** The device thread (the busiest thread other than the main one): CPU ms per MiB. */
  readonly deviceMsPerMiB: number;
  /** … and its minor page faults per 4 KiB page written. */
  readonly deviceFaultsPerPage: number;
  readonly mainMsPerMiB: number;
  /** The main thread's faults per page: it makes each chunk's fresh 1 MiB, as a socket read does. */
  readonly mainFaultsPerPage: number;
  /** Threads that ended meanwhile (the toucher, done before the last write): CPU, faults. */
  readonly endedMsPerMiB: number;
  readonly endedFaultsPerPage: number;
  /** Every thread of the process. */
  readonly totalMsPerMiB: number;
}

interface Mark {
  readonly threads: Map<number, ThreadStat>;
  /** The whole process, ended threads included (getrusage). */
  readonly cpuSeconds: number;
  readonly minorFaults: number;
}

function mark(): Mark {
  const usage = process.resourceUsage();
  return {
    threads: threadStats(process.pid),
    cpuSeconds: (usage.userCPUTime + usage.systemCPUTime) / 1e6,
    minorFaults: usage.minorPageFault,
  };
}

function measured(before: Mark, after: Mark, mib: number): Omit<Round, "wallMs"> {
  const zero: ThreadStat = { cpuSeconds: 0, minorFaults: 0 };
  const delta = (tid: number) => {
    const a = after.threads.get(tid)!;
    const b = before.threads.get(tid) ?? zero;
    return { cpu: a.cpuSeconds - b.cpuSeconds, faults: a.minorFaults - b.minorFaults };
  };
  let device = { cpu: 0, faults: 0 };
  const surviving = { cpu: 0, faults: 0 };
  for (const tid of after.threads.keys()) {
    const d = delta(tid);
    surviving.cpu += d.cpu;
    surviving.faults += d.faults;
    if (tid !== process.pid && d.cpu >= device.cpu) device = d;
  }
  const pages = (mib * MiB) / PAGE_SIZE_BYTES;
  const ms = (s: number) => (s * 1000) / mib;
  const cpu = after.cpuSeconds - before.cpuSeconds;
  const faults = after.minorFaults - before.minorFaults;
  return {
    deviceMsPerMiB: ms(device.cpu),
    deviceFaultsPerPage: device.faults / pages,
    mainMsPerMiB: ms(delta(process.pid).cpu),
    mainFaultsPerPage: delta(process.pid).faults / pages,
    endedMsPerMiB: ms(Math.max(0, cpu - surviving.cpu)),
    endedFaultsPerPage: Math.max(0, faults - surviving.faults) / pages,
    totalMsPerMiB: ms(cpu),
  };
}

function drained(device: Device): Promise<void> {
  return new Promise((resolve) => device.queue.afterDevice(resolve));
}

/** Every chunk due by now is submitted, then the main thread sleeps PACE_MS (no spinning). */
async function writeAll(device: Device, id: number, mib: number): Promise<void> {
  const start = performance.now();
  let i = 0;
  while (i < mib) {
    const due = Math.min(mib, Math.floor((performance.now() - start) / CHUNK_EVERY_MS) + 1);
    for (; i < due; i++) {
      const data = new Uint8Array(MiB).fill((i % 251) + 1);
      device.writePages([{ id, at: i * MiB, data }], true);
    }
    await sleep(PACE_MS);
  }
  await drained(device);
}

async function round(way: Way, mib: number): Promise<Round> {
  const device = new Device(
    { seed: 1, vramBytes: 2 * mib * MiB, maxBoBytes: mib * MiB, maxKernelWork: 1 },
    workerExecutor({ maxCallMs: 60_000, prefaultMinCores: 1 })(),
  );
  try {
    const bo = device.allocBo(device.createContext(), mib * MiB);
    if ("code" in bo) throw new Error(bo.message);
    await drained(device);
    if (way === "reused") await writeAll(device, bo.id, mib);
    if (way === "prefault") device.prefault([bo]);
    await sleep(START_GAP_MS);
    const before = mark();
    const t0 = performance.now();
    await writeAll(device, bo.id, mib);
    const wallMs = performance.now() - t0;
    return { wallMs, ...measured(before, mark(), mib) };
  } finally {
    device.close();
  }
}

export async function runSnapshotPrefault(): Promise<void> {
  const mib = Number(process.env.BENCH_PREFAULT_MIB ?? 256);
  const ways: Way[] = ["fresh", "prefault", "reused"];
  const rounds = new Map<Way, Round[]>(ways.map((w) => [w, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const way of ways) rounds.get(way)!.push(await round(way, mib));
  }
  const metrics: Metric[] = [];
  for (const way of ways) {
    const got = rounds.get(way)!;
    const field = (name: string, pick: (r: Round) => number, unit = "ms/MiB") =>
      metrics.push({ name: `${way}_${name}`, value: median(got.map(pick)), unit });
    field("device_cpu_ms_per_mib", (r) => r.deviceMsPerMiB);
    field("device_faults_per_page", (r) => r.deviceFaultsPerPage, "faults");
    field("ended_threads_cpu_ms_per_mib", (r) => r.endedMsPerMiB);
    field("ended_threads_faults_per_page", (r) => r.endedFaultsPerPage, "faults");
    field("main_cpu_ms_per_mib", (r) => r.mainMsPerMiB);
    field("main_faults_per_page", (r) => r.mainFaultsPerPage, "faults");
    field("process_cpu_ms_per_mib", (r) => r.totalMsPerMiB);
    field("wall_ms", (r) => r.wallMs, "ms");
  }
  publish({
    name: "snapshot-prefault",
    metrics,
    notes: [
      `${mib} MiB in 1 MiB page writes moved to the device thread, one per ${CHUNK_EVERY_MS} ms; medians of ${ROUNDS} rounds`,
      "device: the busiest thread other than the main one; ended: threads gone by the last write (the toucher); process: all",
    ],
  });
}
