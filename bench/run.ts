// Runs benchmarks by name: `node bench/dist/run.js gpu-model|guest|replication|failover|hot-paths|kernel-speed|device-crossing|all`.
// Each prints a table and writes bench/results/<name>.json.
import { runDeviceCrossing } from "./device-crossing.js";
import { runFailover } from "./failover.js";
import { runGpuModel } from "./gpu-model.js";
import { runGuest } from "./guest.js";
import { runHotPaths } from "./hot-paths.js";
import { runKernelSpeed } from "./kernel-speed.js";
import { runReplication } from "./replication.js";

const BENCHMARKS: ReadonlyMap<string, () => Promise<void>> = new Map([
  ["gpu-model", runGpuModel],
  ["guest", runGuest],
  ["replication", runReplication],
  ["failover", runFailover],
  ["hot-paths", runHotPaths],
  ["kernel-speed", runKernelSpeed],
  ["device-crossing", runDeviceCrossing],
]);

const USAGE = `usage: npm run bench -- <${[...BENCHMARKS.keys(), "all"].join("|")}>`;

async function main(argv: readonly string[]): Promise<number> {
  const name = argv[0];
  if (argv.length !== 1 || name === undefined || (name !== "all" && !BENCHMARKS.has(name))) {
    console.error(USAGE);
    return 2;
  }
  const chosen = name === "all" ? [...BENCHMARKS.values()] : [BENCHMARKS.get(name)!];
  for (const run of chosen) await run();
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error("bench: failed:", e);
    process.exit(1);
  },
);
