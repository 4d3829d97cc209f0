// Where a snapshot's chunks wait, from the per-chunk timestamps both nodes write with
// BENCH_SNAPSHOT_TRACE=DIR (packages/common/src/snapshot-trace.ts): a run's files, one per node.
//   BENCH_SNAPSHOT_TRACE=DIR BENCH_SNAPSHOT_SIZES=1g npm run bench -- replication --phase snapshot
//   node bench/dist/snapshot-trace.js DIR [windowChunks]
// Prints the snapshot's start (the primary's "begun" to the first chunk of pages on the
// standby, stage by stage: chunk 0 on the replication stream, then the pull's connection),
// then, over the middle 80 % of the chunks: each stage to the next (median, p90), the
// standby's time between received chunks sorted by why it waited, and each node's garbage
// collections (V8's kind: 1 scavenge, 4 mark-compact, 8 incremental marking) while it ran.
// Use one size per directory: a second snapshot's indexes would overwrite the first's.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

interface Row {
  readonly stage: string;
  readonly index: number;
  readonly atMs: number;
  readonly ms?: number;
}

const STAGES = [
  "p.asked",
  "p.arrived",
  "p.produced",
  "p.written",
  "s.received",
  "s.stepped",
  "s.ackSent",
  "p.ackSeen",
] as const;
/** The start, in order: [stage, chunk index] (pull stages carry the first chunk pulled, or 0). */
const START: readonly (readonly [string, number, string])[] = [
  ["p.produced", 0, "primary: chunk 0 made (metadata exported; the device done with earlier work)"],
  ["p.sent", 0, "primary: chunk 0 encoded and written to the stream"],
  ["s.received", 0, "standby: chunk 0 received (transport, decode)"],
  ["s.stepped", 0, "standby: chunk 0 restored (device, buffers, sessions and their replies)"],
  ["s.pullOpen", 1, "standby: pull opened (before chunk 0 is restored: on its arrival)"],
  ["s.pullConnected", 0, "standby: pull connected, hello written"],
  ["p.pullOpened", 1, "primary: pull's hello taken"],
  ["s.pullAccepted", 0, "standby: pull accepted"],
  ["s.received", 1, "standby: chunk 1 received"],
];

/** The snapshot's start, from the last "begun" before chunk 0 reached the standby. */
function printStart(rows: readonly Row[]): void {
  const first = (stage: string, index: number, after: number) =>
    rows
      .filter((r) => r.stage === stage && r.index === index && r.atMs >= after)
      .reduce((m, r) => Math.min(m, r.atMs), Number.POSITIVE_INFINITY);
  const begun = rows.filter((r) => r.stage === "p.begun").map((r) => r.atMs);
  const chunk0 = first("s.received", 0, Number.NEGATIVE_INFINITY);
  const t0 = Math.max(...begun.filter((t) => t <= chunk0));
  if (!Number.isFinite(t0)) return;
  const dropped = begun.length - 1;
  console.log(
    `start (snapshots begun: ${begun.length}${dropped > 0 ? `, ${dropped} abandoned before this one` : ""}), ms after "begun":`,
  );
  // In the order they happened (the pull may open before chunk 0 is restored).
  const seen = START.map(([stage, index, what]) => ({ t: first(stage, index, t0), what }))
    .filter((x) => Number.isFinite(x.t))
    .sort((a, b) => a.t - b.t);
  let prev = t0;
  for (const { t, what } of seen) {
    console.log(
      `  ${(t - t0).toFixed(1).padStart(7)}  (+${(t - prev).toFixed(1).padStart(5)})  ${what}`,
    );
    prev = t;
  }
}

/** A gap between two received chunks up to this long counts as flowing. */
const FLOWING_MS = 2;

function readDir(dir: string): Row[][] {
  return readdirSync(dir)
    .filter((f) => f.startsWith("snapshot-trace-") && f.endsWith(".jsonl"))
    .map((f) =>
      readFileSync(path.join(dir, f), "utf8")
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as Row),
    );
}

const quantile = (xs: number[], q: number): number =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))] ?? Number.NaN;

function main(): void {
  const dir = process.argv[2];
  if (dir === undefined) throw new Error("usage: snapshot-trace.js DIR [windowChunks]");
  const windowChunks = Number(process.argv[3] ?? 16);
  const files = readDir(dir);
  printStart(files.flat());
  // The first time each chunk reached each stage (a resend is not a later arrival).
  const at = new Map<string, Map<number, number>>();
  for (const row of files.flat()) {
    if (row.stage === "gc") continue;
    const m = at.get(row.stage) ?? new Map<number, number>();
    if (!m.has(row.index)) m.set(row.index, row.atMs);
    at.set(row.stage, m);
  }
  const received = at.get("s.received");
  if (received === undefined || received.size === 0) throw new Error(`no chunks in ${dir}`);
  const n = Math.max(...received.keys());
  const lo = Math.floor(n * 0.1);
  const hi = Math.floor(n * 0.9);
  console.log(`${n} chunks; chunks ${lo}–${hi}, stage → next stage, ms:`);
  for (let s = 0; s + 1 < STAGES.length; s++) {
    const a = at.get(STAGES[s]!);
    const b = at.get(STAGES[s + 1]!);
    const xs: number[] = [];
    for (let i = lo; i < hi; i++) {
      const ta = a?.get(i);
      const tb = b?.get(i);
      if (ta !== undefined && tb !== undefined) xs.push(tb - ta);
    }
    if (xs.length === 0) continue;
    const name = `${STAGES[s]} → ${STAGES[s + 1]}`.padEnd(26);
    console.log(
      `  ${name} median ${quantile(xs, 0.5).toFixed(2)}  p90 ${quantile(xs, 0.9).toFixed(2)}`,
    );
  }
  // The standby's time between chunks: flowing, or waiting, and for what.
  const written = at.get("p.written") ?? new Map<number, number>();
  const arrived = at.get("p.arrived") ?? new Map<number, number>();
  const acks = [...(at.get("p.ackSeen") ?? new Map<number, number>()).entries()];
  const why = new Map<string, number>();
  let total = 0;
  for (let i = 2; i <= n; i++) {
    const prev = received.get(i - 1);
    const t = received.get(i);
    if (prev === undefined || t === undefined) continue;
    const gap = t - prev;
    total += gap;
    let reason: string;
    if (gap <= FLOWING_MS) reason = `flowing (≤ ${FLOWING_MS} ms)`;
    else if ((written.get(i) ?? 0) <= prev) reason = "written already: transport or the standby";
    else if ((arrived.get(i) ?? 0) > prev) reason = "the primary's device read it late";
    else {
      const acked = acks.filter(([, a]) => a <= prev).reduce((m, [k]) => Math.max(m, k), 0);
      reason = i - 1 - acked >= windowChunks ? "the window was full" : "the primary, other";
    }
    why.set(reason, (why.get(reason) ?? 0) + gap);
  }
  console.log(`the standby between chunks (${total.toFixed(0)} ms in all):`);
  for (const [reason, ms] of [...why.entries()].sort((a, b) => b[1] - a[1])) {
    console.log(`  ${((100 * ms) / total).toFixed(1).padStart(5)} %  ${reason}`);
  }
  for (const rows of files) {
    const chunks = rows.filter((r) => r.stage !== "gc");
    if (chunks.length === 0) continue;
    const from = Math.min(...chunks.map((r) => r.atMs));
    const to = Math.max(...chunks.map((r) => r.atMs));
    const kinds = new Map<number, { count: number; ms: number }>();
    for (const r of rows) {
      if (r.stage !== "gc" || r.atMs < from || r.atMs > to) continue;
      const k = kinds.get(r.index) ?? { count: 0, ms: 0 };
      k.count++;
      k.ms += r.ms ?? 0;
      kinds.set(r.index, k);
    }
    const node = chunks[0]!.stage.startsWith("p.") ? "primary" : "standby";
    const list = [...kinds.entries()].map(
      ([k, v]) => `kind ${k}: ${v.count} (${v.ms.toFixed(1)} ms)`,
    );
    console.log(
      `${node} main-thread GCs over ${(to - from).toFixed(0)} ms: ${list.join(", ") || "none"}`,
    );
  }
}

main();
