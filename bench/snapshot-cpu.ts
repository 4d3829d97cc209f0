// CPU time per MiB of a snapshot on each node, main thread apart from its other threads (the
// device thread, the lease thread, V8's and libuv's helpers), over the middle of the transfer:
// from the first status poll at 10 % of the bytes acknowledged to the last one at 90 % at most
// (the standby's start, its first pull and the last chunks' drain left out). The primary's
// include its guest's calls meanwhile (the bench's guest never stops; on a loaded box its share
// per second varies too much to be taken off). CPU time, not wall-clock: it holds better on a
// shared box than rates do, and says which thread bounds the rate.
import { performance } from "node:perf_hooks";
import { type NodeProcess, type ThreadStat, threadStats } from "./node-process.js";

const MiB = 2 ** 20;
const FROM = 0.1;
const TO = 0.9;

type Threads = Map<number, number>;
type Stats = Map<number, ThreadStat>;

interface Sample {
  readonly atMs: number;
  readonly doneBytes: number;
  readonly primary: Stats;
  readonly standby: Stats;
}

export interface SnapshotCpu {
  /** MiB acknowledged between the two samples, and the seconds between them. */
  readonly mib: number;
  readonly seconds: number;
  readonly primaryMainMsPerMiB: number;
  readonly primaryOtherMsPerMiB: number;
  readonly standbyMainMsPerMiB: number;
  readonly standbyOtherMsPerMiB: number;
  /** The busiest other thread of each node (the device thread while it reads or writes). */
  readonly primaryTopOtherMsPerMiB: number;
  readonly standbyTopOtherMsPerMiB: number;
  /**
   * The standby's minor page faults per 4 KiB page acknowledged: its main thread's, and its
   * other threads' that lived through the stretch (a page fault per page is a write into fresh
   * memory: the VRAM's, or a fresh receive buffer's).
   */
  readonly standbyMainFaultsPerPage: number;
  readonly standbyOtherFaultsPerPage: number;
}

export class SnapshotCpuMeter {
  private readonly samples: Sample[] = [];
  private readonly primary: NodeProcess;

  constructor(primary: NodeProcess) {
    this.primary = primary;
  }

  /** One poll: the snapshot's bytes acknowledged so far and both nodes' thread CPU times. */
  sample(doneBytes: number, standby: NodeProcess): void {
    try {
      this.samples.push({
        atMs: performance.now(),
        doneBytes,
        primary: threadStats(this.primary.pid),
        standby: threadStats(standby.pid),
      });
    } catch {
      // a thread ended while its file was read: this poll is left out
    }
  }

  /** Per MiB between the 10 % and 90 % samples; undefined when the polls missed that stretch. */
  result(totalBytes: number, standby: NodeProcess): SnapshotCpu | undefined {
    const first = this.samples.find((s) => s.doneBytes >= FROM * totalBytes);
    const last = this.samples.findLast((s) => s.doneBytes <= TO * totalBytes);
    if (first === undefined || last === undefined || last.doneBytes <= first.doneBytes) {
      return undefined;
    }
    const mib = (last.doneBytes - first.doneBytes) / MiB;
    const seconds = (last.atMs - first.atMs) / 1000;
    const cpu = (m: Stats): Threads => new Map([...m].map(([tid, t]) => [tid, t.cpuSeconds]));
    const faults = (m: Stats): Threads => new Map([...m].map(([tid, t]) => [tid, t.minorFaults]));
    const p = split(delta(cpu(first.primary), cpu(last.primary)), this.primary.pid);
    const s = split(delta(cpu(first.standby), cpu(last.standby)), standby.pid);
    const f = split(delta(faults(first.standby), faults(last.standby)), standby.pid);
    const pages = (mib * MiB) / 4096;
    const perMiB = (cpuSeconds: number) => (cpuSeconds * 1000) / mib;
    return {
      mib,
      seconds,
      primaryMainMsPerMiB: perMiB(p.main),
      primaryOtherMsPerMiB: perMiB(p.other),
      standbyMainMsPerMiB: perMiB(s.main),
      standbyOtherMsPerMiB: perMiB(s.other),
      primaryTopOtherMsPerMiB: perMiB(p.top),
      standbyTopOtherMsPerMiB: perMiB(s.top),
      standbyMainFaultsPerPage: f.main / pages,
      standbyOtherFaultsPerPage: f.other / pages,
    };
  }
}

/** Each thread's count (CPU seconds, faults) between two readings (threads of the later one). */
function delta(a: Threads, b: Threads): Threads {
  return new Map([...b].map(([tid, cpu]) => [tid, cpu - (a.get(tid) ?? 0)]));
}

/** The main thread's (its id is the pid), the rest's, and the busiest other thread's. */
function split(used: Threads, pid: number) {
  let main = 0;
  let other = 0;
  let top = 0;
  for (const [tid, cpu] of used) {
    if (tid === pid) main += cpu;
    else {
      other += cpu;
      top = Math.max(top, cpu);
    }
  }
  return { main, other, top };
}
