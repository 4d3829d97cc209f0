// Per-chunk timestamps of the snapshot pipeline, for finding where a chunk waits
// (bench/snapshot-trace.ts reads them). Off unless BENCH_SNAPSHOT_TRACE names a directory: then
// each stage a chunk passes is recorded in memory (wall-clock ms, comparable across the two
// local processes), with the main thread's garbage collections, and written to DIR/snapshot-trace-<pid>.jsonl when the process exits.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { PerformanceObserver } from "node:perf_hooks";

const dir = process.env.BENCH_SNAPSHOT_TRACE;
const rows: string[] = [];

/** Whether stages are recorded (callers may skip work to compute an index otherwise). */
export const snapshotTraceOn = dir !== undefined && dir !== "";

if (snapshotTraceOn) {
  // The main thread's garbage collections too (stage "gc", index: V8's kind, ms: how long).
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e as { detail?: { kind?: number } }).detail?.kind ?? 0;
      const atMs = performance.timeOrigin + e.startTime;
      rows.push(
        `{"stage":"gc","index":${kind},"atMs":${atMs.toFixed(3)},"ms":${e.duration.toFixed(3)}}`,
      );
    }
  }).observe({ entryTypes: ["gc"] });
  process.on("exit", () => {
    if (rows.length > 0) {
      writeFileSync(join(dir!, `snapshot-trace-${process.pid}.jsonl`), `${rows.join("\n")}\n`);
    }
  });
}

/** Records that chunk `index` reached `stage` now (nothing when tracing is off). */
export function traceSnapshotChunk(stage: string, index: number): void {
  if (!snapshotTraceOn) return;
  const atMs = performance.timeOrigin + performance.now();
  rows.push(`{"stage":"${stage}","index":${index},"atMs":${atMs.toFixed(3)}}`);
}
