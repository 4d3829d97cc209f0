// The simulator's command line: `node test/dist/sim/run.js --seeds N --seed S [--verbose]`
// runs seeds S..S+N-1 (S defaults to a random one, N to 1000), prints every failing run with
// its seed and parameters (every run with --verbose) and exits 1 if any failed. --trace prints
// every event of every run (use it with --seeds 1). --failover runs the failover simulator
// (test/sim/failover) instead of the replication one.
import { parseArgs } from "node:util";
import {
  formatFailoverResult,
  formatFailoverSummary,
  runFailoverSeeds,
} from "./failover/run-seeds.js";
import { formatResult, formatSummary, runSeeds } from "./run-seeds.js";

const { values } = parseArgs({
  options: {
    seeds: { type: "string", default: "1000" },
    seed: { type: "string" },
    verbose: { type: "boolean", default: false },
    trace: { type: "boolean", default: false },
    failover: { type: "boolean", default: false },
  },
});

const runs = Number(values.seeds);
const baseSeed =
  values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(baseSeed) || baseSeed < 0) {
  console.error(
    "usage: run.js [--failover] [--seeds N] [--seed S] [--verbose] [--trace]  (N ≥ 1, S ≥ 0 integers)",
  );
  process.exit(2);
}
const trace = values.trace ? (line: string) => console.log(line) : undefined;
if (values.failover) {
  console.log(`simulating failover on ${runs} seeds from ${baseSeed}`);
  const report = runFailoverSeeds(baseSeed, runs, trace, (result) => {
    if (values.verbose || result.failure !== undefined) console.log(formatFailoverResult(result));
  });
  console.log(formatFailoverSummary(report));
  process.exitCode = report.failures.length > 0 ? 1 : 0;
} else {
  console.log(`simulating ${runs} seeds from ${baseSeed}`);
  const report = runSeeds(baseSeed, runs, trace, (result) => {
    if (values.verbose || result.failure !== undefined) console.log(formatResult(result));
  });
  console.log(formatSummary(report));
  process.exitCode = report.failures.length > 0 ? 1 : 0;
}
