// Runs benchmarks by name: `node bench/dist/run.js gpu-model|guest|replication|failover|hot-paths|kernel-speed|device-crossing|entry-codec|snapshot-stages|snapshot-prefault|gpu|gpu-latency|all`
// (`all` without gpu and gpu-latency, which need a GPU host).
// Each prints a table and writes bench/results/<name>.json. The replication benchmark also
// takes `--phase a,b` (its phases; as BENCH_PHASES) and `--before REV|DIR` (the build its
// `before` phase compares with; HEAD~1 by default).
import { runDeviceCrossing } from "./device-crossing.js";
import { runEntryCodec } from "./entry-codec.js";
import { runFailover } from "./failover.js";
import { runGpu } from "./gpu.js";
import { runGpuLatency } from "./gpu-latency.js";
import { runGpuModel } from "./gpu-model.js";
import { runGuest } from "./guest.js";
import { runHotPaths } from "./hot-paths.js";
import { runKernelSpeed } from "./kernel-speed.js";
import { type ReplicationOptions, runReplication } from "./replication.js";
import { runSnapshotPrefault } from "./snapshot-prefault.js";
import { runSnapshotStages } from "./snapshot-stages.js";

const BENCHMARKS: ReadonlyMap<string, (o: ReplicationOptions) => Promise<void>> = new Map([
  ["gpu-model", runGpuModel],
  ["guest", runGuest],
  ["replication", runReplication],
  ["failover", runFailover],
  ["hot-paths", runHotPaths],
  ["kernel-speed", runKernelSpeed],
  ["device-crossing", runDeviceCrossing],
  ["entry-codec", runEntryCodec],
  ["gpu", runGpu],
  ["gpu-latency", runGpuLatency],
  ["snapshot-stages", runSnapshotStages],
  ["snapshot-prefault", runSnapshotPrefault],
]);

const USAGE = `usage: npm run bench -- <${[...BENCHMARKS.keys(), "all"].join("|")}>
       npm run bench -- replication [--phase PHASE,…] [--before REV|DIR]`;

/** The flags after the name, or undefined when they are not understood. */
function parseFlags(name: string, rest: readonly string[]): ReplicationOptions | undefined {
  const options: { phases?: string[]; before?: string } = {};
  for (let i = 0; i < rest.length; i += 2) {
    const [flag, value] = [rest[i], rest[i + 1]];
    if (name !== "replication" || value === undefined) return undefined;
    if (flag === "--phase") options.phases = value.split(",").map((p) => p.trim());
    else if (flag === "--before") options.before = value;
    else return undefined;
  }
  return options;
}

async function main(argv: readonly string[]): Promise<number> {
  const name = argv[0];
  const options = name === undefined ? undefined : parseFlags(name, argv.slice(1));
  if (name === undefined || options === undefined || (name !== "all" && !BENCHMARKS.has(name))) {
    console.error(USAGE);
    return 2;
  }
  // `all` leaves out gpu and gpu-latency: they need a GPU host (npm run bench -- gpu there).
  const chosen =
    name === "all"
      ? [...BENCHMARKS].filter(([n]) => n !== "gpu" && n !== "gpu-latency").map(([, run]) => run)
      : [BENCHMARKS.get(name)!];
  for (const run of chosen) await run(options);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error("bench: failed:", e);
    process.exit(1);
  },
);
