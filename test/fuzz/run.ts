// npm run fuzz -- [--runs N] [--seed S] [--target NAME]: every fuzz target of
// test/fuzz/targets.ts for N runs (default 2000) each, from seed S (default: a random one,
// printed so a failure can be replayed with --seed). Prints one line per target; exit 1 if a
// property failed (its counterexample follows), 2 on bad arguments.
import { parseArgs } from "node:util";
import fc from "fast-check";
import { FUZZ_TARGETS } from "./targets.js";

function options() {
  try {
    const { values } = parseArgs({
      options: {
        runs: { type: "string", default: "2000" },
        seed: { type: "string" },
        target: { type: "string" },
      },
      strict: true,
    });
    const runs = Number(values.runs);
    const seed =
      values.seed === undefined ? (Date.now() ^ (process.pid << 16)) | 0 : Number(values.seed);
    if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(seed))
      throw new Error("--runs and --seed take integers");
    return { runs, seed, target: values.target };
  } catch (e) {
    console.error(
      `fuzz: ${(e as Error).message}\nusage: npm run fuzz -- [--runs N] [--seed S] [--target NAME]`,
    );
    process.exit(2);
  }
}

const { runs, seed, target } = options();
const chosen = FUZZ_TARGETS.filter((t) => target === undefined || t.name.includes(target));
if (chosen.length === 0) {
  console.error(
    `fuzz: no target matches ${target}; targets: ${FUZZ_TARGETS.map((t) => t.name).join(", ")}`,
  );
  process.exit(2);
}
console.log(`fuzz: seed ${seed}, ${runs} runs per target, ${chosen.length} targets`);
let failed = 0;
for (const t of chosen) {
  const started = performance.now();
  const result = await fc.check(t.property(), { numRuns: runs, seed });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  if (result.failed) {
    failed++;
    console.log(`FAIL ${t.name}: after ${result.numRuns} runs, ${seconds} s`);
    console.log(fc.defaultReportMessage(result));
  } else {
    console.log(`ok   ${t.name}: ${result.numRuns} runs, ${seconds} s`);
  }
}
process.exit(failed > 0 ? 1 : 0);
