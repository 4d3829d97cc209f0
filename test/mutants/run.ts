// `npm run mutants`: plants each mutant of table.ts in a scratch copy of this working tree, one
// after the other, builds it and runs the failover simulator, the scenario files and the
// replication simulator against it until one fails (the mutant is killed). Prints a table,
// writes it as JSON, and exits 1 if a mutant survived or did not build, 2 if the run could
// not judge (a stale anchor, a tree that does not build or fails unmutated).
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, InvalidArgumentError } from "commander";
import {
  allKilled,
  formatTable,
  type Kill,
  type Mutant,
  type MutantResult,
  type Outcome,
  selectMutants,
} from "./mutant.js";
import { checkAnchor, ScratchTree } from "./scratch.js";
import { build, killChildren, SUITES, type SuiteOptions } from "./suites.js";
import { MUTANTS } from "./table.js";

const root = fileURLToPath(new URL("../../..", import.meta.url));

function integer(min: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`an integer ≥ ${min}`);
    return n;
  };
}

const program = new Command("mutants")
  .description("plant each mutant of test/mutants/table.ts in a copy of this tree; all must die")
  .option(
    "--only <name>",
    "run only this mutant (repeatable)",
    (v, acc: string[]) => [...acc, v],
    [],
  )
  .option("--seeds <n>", "simulator seeds per mutant", integer(1), 300)
  .option("--seed <s>", "the simulators' base seed", integer(0), 1)
  .option("--timeout-s <s>", "limit for each build and suite", integer(1), 300)
  .option("--json <path>", "where the results go", "test/mutants/last.json")
  .option("--no-baseline", "skip the suites on the unmutated tree")
  .option("--list", "print the mutants and exit")
  .option("--keep", "keep the scratch tree (its path is printed)")
  .parse();

const opts = program.opts<{
  only: string[];
  seeds: number;
  seed: number;
  timeoutS: number;
  json: string;
  baseline: boolean;
  list?: boolean;
  keep?: boolean;
}>();

function fail(message: string): never {
  console.error(`mutants: ${message}`);
  process.exit(2);
}

/** The run cannot judge the mutants (exit 2). */
class CannotJudge extends Error {}

let selected: Mutant[];
try {
  selected = selectMutants(MUTANTS, opts.only);
} catch (e) {
  fail((e as Error).message);
}

if (opts.list) {
  for (const m of selected)
    console.log(`${m.name.padEnd(28)} ${m.file}\n${"".padEnd(29)}${m.what}`);
  process.exit(0);
}

const elapsed = (since: number) => performance.now() - since;
const timeoutMs = opts.timeoutS * 1000;

/** The first suite that fails on the tree as it is, or undefined when all pass. */
async function firstKill(options: SuiteOptions): Promise<Kill | undefined> {
  for (const suite of SUITES) {
    const kill = await suite.run(options);
    if (kill) return kill;
  }
  return undefined;
}

async function judge(tree: ScratchTree, mutant: Mutant, options: SuiteOptions): Promise<Outcome> {
  const restore = tree.plant(mutant);
  try {
    const error = await build(tree.dir, timeoutMs);
    if (error !== undefined) return { status: "invalid", detail: error };
    const by = await firstKill(options);
    return by ? { status: "killed", by } : { status: "survived" };
  } finally {
    restore();
  }
}

async function main(): Promise<number> {
  // A stale anchor fails the run before anything is copied or built.
  for (const m of selected) checkAnchor(root, m);
  const tree = ScratchTree.create(root);
  const cleanUp = () => {
    killChildren();
    if (!opts.keep) tree.remove();
  };
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      cleanUp();
      process.exit(signal === "SIGINT" ? 130 : 143);
    });
  }
  try {
    console.log(`scratch tree ${tree.dir}: building`);
    const started = performance.now();
    const error = await build(tree.dir, timeoutMs);
    if (error !== undefined) throw new CannotJudge(`the unmutated tree does not build: ${error}`);
    const options = { dir: tree.dir, baseSeed: opts.seed, seeds: opts.seeds, timeoutMs };
    const suites = SUITES.map((s) => s.name).join(", ");
    if (opts.baseline) {
      const kill = await firstKill(options);
      if (kill) {
        throw new CannotJudge(`the unmutated tree fails ${kill.suite} (${kill.where})`);
      }
      console.log(`baseline: ${suites} pass (${(elapsed(started) / 1000).toFixed(1)} s)`);
    }
    const results: MutantResult[] = [];
    for (const mutant of selected) {
      const since = performance.now();
      const outcome = await judge(tree, mutant, options);
      const result = { name: mutant.name, file: mutant.file, outcome, elapsedMs: elapsed(since) };
      results.push(result);
      console.log(formatTable([result]).split("\n")[2]);
    }
    console.log(`\n${opts.seeds} seeds from ${opts.seed}; suites in order: ${suites}\n`);
    console.log(formatTable(results));
    const json = resolve(root, opts.json);
    mkdirSync(dirname(json), { recursive: true });
    writeFileSync(
      json,
      `${JSON.stringify(
        {
          commit: execFileSync("git", ["rev-parse", "HEAD"], { cwd: root }).toString().trim(),
          dirty: execFileSync("git", ["status", "--porcelain"], { cwd: root }).length > 0,
          baseSeed: opts.seed,
          seeds: opts.seeds,
          suites: SUITES.map((s) => s.name),
          allKilled: allKilled(results),
          results,
        },
        null,
        2,
      )}\n`,
    );
    console.log(`written ${relative(process.cwd(), json)}`);
    return allKilled(results) ? 0 : 1;
  } finally {
    if (opts.keep) console.log(`kept ${tree.dir}`);
    cleanUp();
  }
}

main().then(
  (code) => process.exit(code),
  (e: Error) => fail(e.message),
);
