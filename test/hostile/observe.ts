// The node's side of an attack, read as an operator would: both nodes' /v1/status every
// 200 ms (each epoch change seen), the attacked node's resident memory (from /proc when it runs
// here, else its process_resident_memory_bytes), its refusal counters from /metrics before and
// after, and the lines its log gained that name a refusal.
import { readFileSync, statSync } from "node:fs";
import { Metrics } from "../support/ops-client.js";

export interface ObservedNode {
  readonly name: string;
  readonly opsUrl: string;
  /** The process id when it runs on this machine. */
  readonly pid?: number;
  readonly logFile?: string;
}

export interface Observation {
  /** Times the pair's highest epoch rose (a promotion, forced or not). */
  readonly epochChanges: number;
  /** "name role@epoch" at the start and at the end. */
  readonly rolesBefore: string[];
  readonly rolesAfter: string[];
  readonly peakRssMb: number | null;
  readonly rssBeforeMb: number | null;
  /** Increase of the refusal counters over the attack, or null when none is named. */
  readonly refusalsCounted: number | null;
  /** Log lines gained during the attack that name a refusal (null: no log here). */
  readonly refusalLogLines: number | null;
}

const get = async (url: string) => {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  if (!res.ok) throw new Error(`${url}: ${res.status}`);
  return res;
};

async function roleOf(n: ObservedNode): Promise<{ role: string; epoch: number } | undefined> {
  try {
    return (await (await get(`${n.opsUrl}/v1/status`)).json()) as { role: string; epoch: number };
  } catch {
    return undefined; // busy or restarting: the next sample tells
  }
}

async function rssMb(n: ObservedNode): Promise<number | undefined> {
  if (n.pid !== undefined) {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${n.pid}/status`, "utf8"));
      if (m) return Number(m[1]) / 1024;
    } catch {
      // gone, or not on this machine
    }
  }
  try {
    const m = new Metrics(await (await get(`${n.opsUrl}/metrics`)).text());
    const bytes = m.get("process_resident_memory_bytes");
    return bytes > 0 ? bytes / 1024 ** 2 : undefined;
  } catch {
    return undefined;
  }
}

async function refusals(n: ObservedNode, names: readonly string[]): Promise<number | undefined> {
  try {
    const m = new Metrics(await (await get(`${n.opsUrl}/metrics`)).text());
    return names.reduce((sum, name) => sum + m.get(name), 0);
  } catch {
    return undefined;
  }
}

const logSize = (file: string | undefined) => {
  try {
    return file ? statSync(file).size : 0;
  } catch {
    return 0;
  }
};

/** Lines added to `file` after byte `from` that say something was refused. */
function refusalLines(file: string, from: number): number {
  const text = readFileSync(file).subarray(from).toString("utf8");
  return text
    .split("\n")
    .filter((l) => /refus|reject|rate.?limit|goaway|enhance_your_calm|reap/i.test(l)).length;
}

export class Observer {
  private timer: NodeJS.Timeout | undefined;
  private highest: number | undefined;
  private changes = 0;
  private peak: number | undefined;
  private rssBefore: number | undefined;
  private countersBefore: number | undefined;
  private logFrom = 0;
  private rolesBefore: string[] = [];
  private sampling: Promise<void> = Promise.resolve();

  constructor(
    private readonly nodes: readonly ObservedNode[],
    private readonly attacked: ObservedNode,
    private readonly refusalMetrics: readonly string[],
  ) {}

  private async sample(): Promise<string[]> {
    const roles = await Promise.all(this.nodes.map(roleOf));
    const seen: string[] = [];
    let highest: number | undefined;
    for (const [i, r] of roles.entries()) {
      const name = this.nodes[i]!.name;
      if (r === undefined) {
        seen.push(`${name} unreachable`);
        continue;
      }
      seen.push(`${name} ${r.role}@${r.epoch}`);
      highest = Math.max(highest ?? 0, r.epoch);
    }
    if (highest !== undefined) {
      if (this.highest !== undefined && highest > this.highest) this.changes++;
      this.highest = Math.max(this.highest ?? 0, highest);
    }
    const rss = await rssMb(this.attacked);
    if (rss !== undefined) this.peak = Math.max(this.peak ?? 0, rss);
    return seen;
  }

  async start(): Promise<void> {
    this.rolesBefore = await this.sample();
    this.rssBefore = this.peak;
    this.countersBefore = await refusals(this.attacked, this.refusalMetrics);
    this.logFrom = logSize(this.attacked.logFile);
    this.timer = setInterval(() => {
      this.sampling = this.sampling.then(() => this.sample().then(() => undefined));
    }, 200);
  }

  async stop(): Promise<Observation> {
    clearInterval(this.timer);
    await this.sampling;
    const rolesAfter = await this.sample();
    const after = await refusals(this.attacked, this.refusalMetrics);
    const counted =
      this.refusalMetrics.length === 0 || after === undefined || this.countersBefore === undefined
        ? null
        : after - this.countersBefore;
    return {
      epochChanges: this.changes,
      rolesBefore: this.rolesBefore,
      rolesAfter,
      peakRssMb: this.peak ?? null,
      rssBeforeMb: this.rssBefore ?? null,
      refusalsCounted: counted,
      refusalLogLines: this.attacked.logFile
        ? refusalLines(this.attacked.logFile, this.logFrom)
        : null,
    };
  }
}
