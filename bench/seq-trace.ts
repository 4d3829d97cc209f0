// Where a gemm launch of the GPU benchmark stalls (issue #17), from the rows every process
// writes with BENCH_SEQ_TRACE=DIR (packages/common/src/seq-trace.ts): the benchmark's own
// (g.send / g.reply per launch, round.start / round.end), and each node's (link messages with
// their seqs, the device's per-seq submits and completions, GPU batches, guest messages and
// replies, garbage collections, event-loop stalls).
//   BENCH_SEQ_TRACE=DIR BENCH_GPU_GEMM_ONLY=1 BENCH_GPU_MODES=sync node bench/dist/run.js gpu
//   node bench/dist/seq-trace.js DIR [stallMs] [timelines]
// Prints per measured round: the launches' round trips, each process's GCs and loop stalls;
// then every stall (a run of launches slower than stallMs, 10 by default) with what each node
// did around it — its longest silence (no row at all), the last ack / device completion /
// reply before the stall ended — and the whole merged timeline of the worst `timelines` (3).
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

interface Row {
  readonly stage: string;
  readonly a: number;
  readonly b: number;
  readonly atMs: number;
}

interface Proc {
  readonly pid: string;
  readonly argv: string;
  readonly rows: readonly Row[];
}

/** At most this many rows of one stall's timeline are printed. */
const TIMELINE_ROWS = 400;
/** The benchmark's phases by round.start's b (bench/gpu.ts GEMM_SETUPS). */
const SETUPS = ["standalone", "async", "sync"];

function readDir(dir: string): Proc[] {
  return readdirSync(dir)
    .filter((f) => f.startsWith("seq-trace-") && f.endsWith(".csv"))
    .map((f) => {
      const lines = readFileSync(path.join(dir, f), "utf8").split("\n");
      const head = lines[0] ?? "";
      const rows: Row[] = [];
      for (const l of lines.slice(2)) {
        if (l === "") continue;
        const [stage, a, b, at] = l.split(",");
        rows.push({ stage: stage!, a: Number(a), b: Number(b), atMs: Number(at) });
      }
      rows.sort((x, y) => x.atMs - y.atMs);
      return { pid: f.slice(10, -4), argv: head, rows };
    });
}

const quantile = (xs: readonly number[], q: number): number =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))] ?? Number.NaN;

const within = (p: Proc, t0: number, t1: number): Row[] =>
  p.rows.filter((r) => r.atMs >= t0 && r.atMs <= t1);

/** The process with the most rows of `stage` in [t0, t1] (the active node of a role). */
function busiest(procs: readonly Proc[], stage: string, t0: number, t1: number): Proc | undefined {
  let best: Proc | undefined;
  let most = 0;
  for (const p of procs) {
    const n = within(p, t0, t1).filter((r) => r.stage === stage).length;
    if (n > most) {
      most = n;
      best = p;
    }
  }
  return best;
}

/** The longest time without any row in [t0, t1], and the rows on either side of it. */
function silence(rows: readonly Row[], t0: number, t1: number) {
  let best = { ms: 0, from: t0, before: "start", after: "end" };
  let prev = t0;
  let prevStage = "start";
  for (const r of rows) {
    if (r.atMs - prev > best.ms) {
      best = { ms: r.atMs - prev, from: prev, before: prevStage, after: r.stage };
    }
    prev = r.atMs;
    prevStage = `${r.stage}(${r.a})`;
  }
  if (t1 - prev > best.ms) best = { ms: t1 - prev, from: prev, before: prevStage, after: "end" };
  return best;
}

function lastOf(rows: readonly Row[], stage: string, t0: number): string {
  const r = rows.filter((x) => x.stage === stage).at(-1);
  return r === undefined ? "-" : `${(r.atMs - t0).toFixed(1)}ms(${r.a},${r.b})`;
}

function nodeSummary(name: string, p: Proc | undefined, t0: number, t1: number): string {
  if (p === undefined) return `${name}: -`;
  const rows = within(p, t0 - 1, t1);
  const s = silence(rows, t0 - 1, t1);
  const gcMs = rows.filter((r) => r.stage === "gc").reduce((n, r) => n + r.b, 0);
  const loop = Math.max(0, ...rows.filter((r) => r.stage === "loop").map((r) => r.a));
  const paused = rows.filter((r) => r.stage === "p.paused" && r.a === 1).length;
  return (
    `${name}: silent ${s.ms.toFixed(1)} ms from +${(s.from - t0).toFixed(1)} (${s.before} → ${s.after}); ` +
    `gc ${gcMs.toFixed(1)} ms; loop late max ${loop.toFixed(1)} ms; ` +
    `last recv.ack ${lastOf(rows, "recv.ack", t0)} send.ack ${lastOf(rows, "send.ack", t0)} ` +
    `recv.entries ${lastOf(rows, "recv.entries", t0)} dev.done ${lastOf(rows, "dev.done", t0)} ` +
    `p.reply ${lastOf(rows, "p.reply", t0)}${paused > 0 ? `; paused ${paused}×` : ""}`
  );
}

/** When `p` first had a `stage` row with a ≥ seq (from `t0`), as "+ms from t0". */
function firstAt(p: Proc | undefined, stage: string, seq: number, t0: number): string {
  const r = p?.rows.find((x) => x.stage === stage && x.a >= seq && x.atMs >= t0);
  return r === undefined ? "-" : `+${(r.atMs - t0).toFixed(1)}`;
}

/**
 * The path of the last entry released in the stall (the primary's last reply in it): when the
 * primary sent it, the standby received and acked it, the ack came back, each device began and
 * finished it, and the reply left — so the stage that came late shows.
 */
function pathOf(who: Map<string, Proc | undefined>, s: Stall): string {
  const primary = who.get("primary");
  const standby = who.get("standby");
  const reply = primary?.rows.filter((r) => r.stage === "p.reply" && r.atMs <= s.t1 + 1).at(-1);
  if (reply === undefined) return "no reply in the stall";
  const seq = reply.a;
  const from = s.t0 - 50;
  const at = (p: Proc | undefined, stage: string) => firstAt(p, stage, seq, from);
  return (
    `seq ${seq}: p.send ${at(primary, "send.entries")} s.recv ${at(standby, "recv.entries")} ` +
    `s.ack ${at(standby, "send.ack")} p.ack ${at(primary, "recv.ack")} ` +
    `p.dev ${at(primary, "dev.submit")}→${at(primary, "dev.done")} ` +
    `s.dev ${at(standby, "dev.submit")}→${at(standby, "dev.done")} ` +
    `p.reply +${(reply.atMs - from).toFixed(1)} (ms from 50 ms before the stall's first send)`
  );
}

/** Stages of a launch's path, in the order they should come (node, stage). */
const PATH: readonly (readonly [string, string])[] = [
  ["primary", "g.recv"],
  ["primary", "dev.submit"],
  ["primary", "send.entries"],
  ["standby", "recv.entries"],
  ["standby", "send.ack"],
  ["primary", "recv.ack"],
  ["primary", "gpu.done"],
  ["primary", "p.reply"],
];

/** A stage found only after another's hit (the ack of this launch's entries). */
const AFTER: Readonly<Record<string, string>> = {
  "standby send.ack": "standby recv.entries",
  "primary recv.ack": "standby send.ack",
};

/**
 * For each launch of the round, when each stage of PATH first came after its send (and before
 * its reply), in µs; the medians and p99s over the launches. Exact for one launch in flight (a
 * small call); with several, a stage may belong to a neighbour.
 */
function pathMedians(who: Map<string, Proc | undefined>, bench: Proc, t0: number, t1: number) {
  const sent = new Map<number, number>();
  const by = new Map<string, number[]>();
  const rows = new Map<string, Row[]>();
  for (const [node, stage] of PATH) {
    const p = who.get(node);
    if (p !== undefined)
      rows.set(
        `${node} ${stage}`,
        within(p, t0, t1).filter((r) => r.stage === stage),
      );
  }
  for (const r of within(bench, t0, t1)) {
    if (r.stage === "g.send") sent.set(r.a, r.atMs);
    if (r.stage !== "g.reply") continue;
    const from = sent.get(r.a);
    if (from === undefined) continue;
    const at = new Map<string, number>();
    for (const [key, list] of rows) {
      // An ack answers this launch's entries: it comes after them, not before.
      const after = at.get(AFTER[key] ?? "") ?? from;
      const hit = list.find((x) => x.atMs >= after && x.atMs <= r.atMs);
      if (hit === undefined) continue;
      at.set(key, hit.atMs);
      const v = by.get(key) ?? [];
      v.push((hit.atMs - from) * 1000);
      by.set(key, v);
    }
    const v = by.get("guest g.reply") ?? [];
    v.push((r.atMs - from) * 1000);
    by.set("guest g.reply", v);
  }
  return [...by.entries()].map(
    ([key, v]) => `${key} ${quantile(v, 0.5).toFixed(0)}/${quantile(v, 0.99).toFixed(0)}`,
  );
}

interface Stall {
  readonly t0: number;
  readonly t1: number;
  readonly launches: number;
  readonly worstMs: number;
}

/** Launches slower than stallMs, overlapping ones merged. */
function stallsOf(bench: Proc, t0: number, t1: number, stallMs: number): Stall[] {
  const sent = new Map<number, number>();
  const out: Stall[] = [];
  for (const r of within(bench, t0, t1)) {
    if (r.stage === "g.send") sent.set(r.a, r.atMs);
    if (r.stage !== "g.reply" || r.b < stallMs) continue;
    const from = sent.get(r.a) ?? r.atMs - r.b;
    const last = out.at(-1);
    if (last !== undefined && from <= last.t1) {
      out[out.length - 1] = {
        t0: last.t0,
        t1: r.atMs,
        launches: last.launches + 1,
        worstMs: Math.max(last.worstMs, r.b),
      };
    } else out.push({ t0: from, t1: r.atMs, launches: 1, worstMs: r.b });
  }
  return out;
}

function timeline(procs: Map<string, Proc | undefined>, s: Stall): string[] {
  const merged: string[] = [];
  const rows: { who: string; r: Row }[] = [];
  for (const [who, p] of procs) {
    if (p === undefined) continue;
    for (const r of within(p, s.t0 - 2, s.t1 + 1)) rows.push({ who, r });
  }
  rows.sort((x, y) => x.r.atMs - y.r.atMs);
  for (const { who, r } of rows.slice(0, TIMELINE_ROWS)) {
    merged.push(
      `    +${(r.atMs - s.t0).toFixed(2).padStart(8)} ${who.padEnd(8)} ${r.stage} ${r.a} ${r.b}`,
    );
  }
  if (rows.length > TIMELINE_ROWS) merged.push(`    … ${rows.length - TIMELINE_ROWS} more rows`);
  return merged;
}

function main(): void {
  const dir = process.argv[2];
  if (dir === undefined) throw new Error("usage: seq-trace.js DIR [stallMs] [timelines]");
  const stallMs = Number(process.argv[3] ?? 10);
  const timelines = Number(process.argv[4] ?? 3);
  const procs = readDir(dir);
  const bench = procs.find((p) => p.rows.some((r) => r.stage === "g.send"));
  if (bench === undefined) throw new Error(`no benchmark rows (g.send) in ${dir}`);
  const nodes = procs.filter((p) => p !== bench);
  const starts = bench.rows.filter((r) => r.stage === "round.start");
  const ends = bench.rows.filter((r) => r.stage === "round.end");
  const all: { setup: string; round: number; stall: Stall; who: Map<string, Proc | undefined> }[] =
    [];
  for (const [i, start] of starts.entries()) {
    const t0 = start.atMs;
    const t1 = ends[i]?.atMs ?? Number.POSITIVE_INFINITY;
    const setup = SETUPS[start.b] ?? String(start.b);
    const primary = busiest(nodes, "g.recv", t0, t1);
    const standby = setup === "standalone" ? undefined : busiest(nodes, "recv.entries", t0, t1);
    const trips = within(bench, t0, t1)
      .filter((r) => r.stage === "g.reply")
      .map((r) => r.b);
    console.log(
      `${setup} round ${start.a + 1}: ${trips.length} launches in ${((t1 - t0) / 1000).toFixed(2)} s, ` +
        `round trip p50 ${quantile(trips, 0.5).toFixed(2)} p99 ${quantile(trips, 0.99).toFixed(2)} ` +
        `max ${Math.max(...trips).toFixed(2)} ms`,
    );
    const who = new Map<string, Proc | undefined>([
      ["guest", bench],
      ["primary", primary],
      ["standby", standby],
    ]);
    for (const [name, p] of who) {
      if (p === undefined) continue;
      const rows = within(p, t0, t1);
      const gcs = rows.filter((r) => r.stage === "gc");
      const loops = rows.filter((r) => r.stage === "loop").map((r) => r.a);
      const polls = rows.filter((r) => r.stage === "dawn.polls");
      const pollRate =
        polls.length > 1
          ? ((polls.at(-1)!.a - polls[0]!.a) / (polls.at(-1)!.atMs - polls[0]!.atMs)) * 1000
          : 0;
      console.log(
        `  ${name} (pid ${p.pid}): ${gcs.length} GCs, ${gcs.reduce((n, r) => n + r.b, 0).toFixed(1)} ms ` +
          `(max ${Math.max(0, ...gcs.map((r) => r.b)).toFixed(1)}; kinds ${[...new Set(gcs.map((r) => r.a))].join("/")}); ` +
          `loop stalls ≥3 ms: ${loops.length}, max ${Math.max(0, ...loops).toFixed(1)} ms; ` +
          `Dawn polls ${pollRate.toFixed(0)}/s`,
      );
    }
    console.log(
      `  path, µs from the send (p50/p99): ${pathMedians(who, bench, t0, t1).join(", ")}`,
    );
    const stalls = stallsOf(bench, t0, t1, stallMs);
    console.log(`  stalls (launches over ${stallMs} ms): ${stalls.length}`);
    for (const s of stalls) {
      console.log(
        `   at +${(s.t0 - t0).toFixed(0)} ms: ${(s.t1 - s.t0).toFixed(1)} ms, ${s.launches} launches, worst ${s.worstMs.toFixed(1)} ms`,
      );
      console.log(`     ${pathOf(who, s)}`);
      for (const name of ["primary", "standby"]) {
        console.log(`     ${nodeSummary(name, who.get(name), s.t0, s.t1)}`);
      }
      all.push({ setup, round: start.a, stall: s, who });
    }
  }
  const worst = [...all].sort((x, y) => y.stall.worstMs - x.stall.worstMs).slice(0, timelines);
  for (const w of worst) {
    console.log(
      `\ntimeline: ${w.setup} round ${w.round + 1}, stall of ${(w.stall.t1 - w.stall.t0).toFixed(1)} ms (ms from its first launch's send)`,
    );
    for (const line of timeline(w.who, w.stall)) console.log(line);
  }
}

main();
