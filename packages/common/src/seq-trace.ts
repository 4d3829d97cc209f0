// Per-entry timestamps of the replication path, for finding where a launch stalls (issue #17;
// bench/seq-trace.ts reads them). Off unless BENCH_SEQ_TRACE names a directory: then each
// stage an entry or message passes (the replication link's sends and receipts with their seqs,
// the device's per-seq submits and completions, the GPU's batches, guest messages and replies)
// is kept in memory as numbers — no string or object per row, so tracing makes no garbage of
// its own — with the main thread's garbage collections and event-loop stalls (a timer that
// fires late), and written to DIR/seq-trace-<pid>.csv when the process exits. Times are
// wall-clock ms (performance.timeOrigin + now), comparable across the processes of one host.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { PerformanceObserver, performance } from "node:perf_hooks";
import { isMainThread } from "node:worker_threads";

const dir = process.env.BENCH_SEQ_TRACE;

/**
 * Whether stages are recorded (callers skip computing what they would record otherwise). The
 * main thread's only: a device worker would write the same file name.
 */
export const seqTraceOn = dir !== undefined && dir !== "" && isMainThread;

/** The loop monitor's period, and the lateness from which a tick counts as a stall. */
const LOOP_PERIOD_MS = 2;
const LOOP_LATE_MS = 3;
const ROW_WORDS = 4;

const stages: string[] = [];
const codes = new Map<string, number>();
let rows = new Float64Array(seqTraceOn ? ROW_WORDS * 65536 : 0);
let used = 0;

/** Records `stage` with two numbers (a seq, a count…) at `atMs` (performance.now() clock). */
export function traceSeqAt(stage: string, a: number, b: number, atMs: number): void {
  if (!seqTraceOn) return;
  let code = codes.get(stage);
  if (code === undefined) {
    code = stages.length;
    stages.push(stage);
    codes.set(stage, code);
  }
  if (used + ROW_WORDS > rows.length) {
    const grown = new Float64Array(rows.length * 2);
    grown.set(rows);
    rows = grown;
  }
  rows[used] = code;
  rows[used + 1] = a;
  rows[used + 2] = b;
  rows[used + 3] = atMs;
  used += ROW_WORDS;
}

/** Records that `stage` happened now (nothing when tracing is off). */
export function traceSeq(stage: string, a = 0, b = 0): void {
  if (seqTraceOn) traceSeqAt(stage, a, b, performance.now());
}

/**
 * Records a replication message sent or received: `send.entries` / `recv.entries` (a: the last
 * entry's seq, b: primaryDoneSeq or -1), `*.ack` (a: received seq, b: applied seq),
 * `*.heartbeat` (a: the primary's last seq), others by kind alone.
 */
export function traceLinkMessage(direction: "send" | "recv", message: unknown): void {
  if (!seqTraceOn) return;
  const m = message as {
    kind?: string;
    entries?: readonly { seq: number }[];
    primaryDoneSeq?: number;
    receivedSeq?: number;
    appliedSeq?: number;
    lastSeq?: number;
  };
  let a = 0;
  let b = 0;
  if (m.kind === "entries") {
    a = m.entries?.at(-1)?.seq ?? 0;
    b = m.primaryDoneSeq ?? -1;
  } else if (m.kind === "ack") {
    a = m.receivedSeq ?? 0;
    b = m.appliedSeq ?? 0;
  } else if (m.kind === "heartbeat") {
    a = m.lastSeq ?? 0;
  }
  traceSeq(`${direction}.${m.kind ?? "?"}`, a, b);
}

function writeRows(): void {
  if (used === 0) return;
  const origin = performance.timeOrigin;
  const lines = [`# pid ${process.pid} argv ${process.argv.slice(1).join(" ")}`, "stage,a,b,atMs"];
  for (let i = 0; i < used; i += ROW_WORDS) {
    const at = (origin + rows[i + 3]!).toFixed(3);
    lines.push(`${stages[rows[i]!]},${rows[i + 1]},${rows[i + 2]},${at}`);
  }
  writeFileSync(join(dir!, `seq-trace-${process.pid}.csv`), `${lines.join("\n")}\n`);
}

if (seqTraceOn) {
  // The main thread's garbage collections (a: V8's kind, b: ms), at their start.
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e as { detail?: { kind?: number } }).detail?.kind ?? 0;
      traceSeqAt("gc", kind, e.duration, e.startTime);
    }
  }).observe({ entryTypes: ["gc"] });
  // Event-loop stalls: a tick LOOP_LATE_MS or more late (a: how late, ms), at the tick.
  let last = performance.now();
  setInterval(() => {
    const now = performance.now();
    const late = now - last - LOOP_PERIOD_MS;
    if (late >= LOOP_LATE_MS) traceSeqAt("loop", late, 0, now);
    last = now;
  }, LOOP_PERIOD_MS).unref();
  process.on("exit", writeRows);
}
