// Loaded into a benchmarked vgpud with NODE_OPTIONS=--import=… (Node 20 refuses --cpu-prof in
// NODE_OPTIONS, and spawnVgpud passes no node flags). Each SIGUSR2 toggles the V8 sampling
// profiler through node:inspector: the first starts it, the second writes
// $BENCH_CPU_PROF_DIR/<n>.cpuprofile (n = 1, 2, …), so a benchmark profiles one phase at a
// time; with BENCH_CPU_PROF_FROM_START=1 the profiler runs from load to the first SIGUSR2 (for
// a node whose interesting work begins as it starts). A profile still running at exit is
// written then. The inspector session of the same
// thread answers synchronously, so writing from the exit handler works.
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import path from "node:path";

const SAMPLING_INTERVAL_US = 500;

const dir = process.env.BENCH_CPU_PROF_DIR;
if (dir !== undefined && dir !== "") install(dir);

function install(outDir: string): void {
  const session = new Session();
  session.connect();
  session.post("Profiler.enable");
  session.post("Profiler.setSamplingInterval", { interval: SAMPLING_INTERVAL_US });
  let running = false;
  let written = 0;
  const stop = () => {
    running = false;
    session.post("Profiler.stop", (error, result) => {
      if (error !== null) return;
      mkdirSync(outDir, { recursive: true });
      const file = path.join(outDir, `${++written}.cpuprofile`);
      // Written under a temporary name first: the benchmark waits for the final name.
      writeFileSync(`${file}.tmp`, JSON.stringify(result.profile));
      renameSync(`${file}.tmp`, file);
    });
  };
  const start = () => {
    running = true;
    session.post("Profiler.start");
  };
  process.on("SIGUSR2", () => (running ? stop() : start()));
  if (process.env.BENCH_CPU_PROF_FROM_START === "1") start();
  process.on("exit", () => {
    if (running) stop();
  });
}
