// A mutant: one small edit planted in shipped code, which the simulator and the scenario files
// must notice (some run fails: the mutant is killed). This file holds the pure part — applying
// an edit to a file's text, judging the outcome, printing the table; run.ts does the I/O.

/** One planted bug: `original` must occur exactly once in `file`; it becomes `replacement`. */
export interface Mutant {
  /** Short name, used by `--only`. */
  readonly name: string;
  /** The bug, in words. */
  readonly what: string;
  /** Path from the repository root. */
  readonly file: string;
  /**
   * The exact text replaced: one whole line with its indentation, or a few whole lines when one
   * line alone is not unique (the anchor). It must occur exactly once, else the mutant is stale.
   */
  readonly original: string;
  readonly replacement: string;
}

/** An anchor that does not occur exactly once: the table must be re-aimed, not skipped. */
export class StaleMutantError extends Error {
  constructor(
    readonly mutant: string,
    readonly occurrences: number,
  ) {
    super(
      occurrences === 0
        ? `mutant ${mutant}: its original lines are not in the file (re-aim it)`
        : `mutant ${mutant}: its original lines occur ${occurrences} times (make the anchor unique)`,
    );
  }
}

/**
 * Where `needle` stands as whole lines in `haystack`: it starts at the start of a line and ends
 * at the end of one (a line changed in any way, even by a comment added, no longer matches).
 */
export function lineMatches(haystack: string, needle: string): number[] {
  const found: number[] = [];
  if (needle.length === 0) return found;
  for (let at = haystack.indexOf(needle); at >= 0; at = haystack.indexOf(needle, at + 1)) {
    const end = at + needle.length;
    const startsLine = at === 0 || haystack[at - 1] === "\n";
    const endsLine = end === haystack.length || haystack[end] === "\n" || haystack[end] === "\r";
    if (startsLine && endsLine) found.push(at);
  }
  return found;
}

/** The mutated text; throws StaleMutantError unless the anchor stands exactly once as whole lines. */
export function applyMutant(source: string, mutant: Mutant): string {
  if (mutant.original === mutant.replacement) {
    throw new Error(`mutant ${mutant.name}: the replacement equals the original`);
  }
  const found = lineMatches(source, mutant.original);
  if (found.length !== 1) throw new StaleMutantError(mutant.name, found.length);
  const at = found[0]!;
  return source.slice(0, at) + mutant.replacement + source.slice(at + mutant.original.length);
}

/** The mutants of `table` named in `only` (all when empty); unknown or repeated names throw. */
export function selectMutants(table: readonly Mutant[], only: readonly string[]): Mutant[] {
  const names = new Set(table.map((m) => m.name));
  if (names.size !== table.length) throw new Error("two mutants share a name");
  const unknown = only.filter((n) => !names.has(n));
  if (unknown.length > 0) {
    throw new Error(`no mutant named ${unknown.join(", ")} (known: ${[...names].join(", ")})`);
  }
  return only.length === 0 ? [...table] : table.filter((m) => only.includes(m.name));
}

/** The suite that failed first on a mutant, and where. */
export interface Kill {
  readonly suite: string;
  /** A failing seed, a scenario file, or the first line of the failure. */
  readonly where: string;
}

export type Outcome =
  /** Some suite failed: the simulator noticed the bug. */
  | { readonly status: "killed"; readonly by: Kill }
  /** Every suite passed with the bug in place. */
  | { readonly status: "survived" }
  /** The mutated tree did not build: the mutant tests nothing (fix the replacement). */
  | { readonly status: "invalid"; readonly detail: string };

export interface MutantResult {
  readonly name: string;
  readonly file: string;
  readonly outcome: Outcome;
  readonly elapsedMs: number;
}

/** The first failing seed of a simulator's output: the seed its replay line names. */
export function firstFailingSeed(output: string): number | undefined {
  const fail = output.indexOf("FAIL ");
  if (fail < 0) return undefined;
  const seed = /--seed (\d+)/.exec(output.slice(fail));
  return seed ? Number(seed[1]) : undefined;
}

/** Whether a run's outcome kills the mutant (every mutant must be killed). */
export function allKilled(results: readonly MutantResult[]): boolean {
  return results.every((r) => r.outcome.status === "killed");
}

/** The table printed at the end: mutant, file, outcome (by which suite, where), time. */
export function formatTable(results: readonly MutantResult[]): string {
  const rows = results.map((r) => [
    r.name,
    r.file,
    r.outcome.status === "killed"
      ? `killed by ${r.outcome.by.suite} (${r.outcome.by.where})`
      : r.outcome.status === "invalid"
        ? `INVALID: ${r.outcome.detail}`
        : "SURVIVED",
    `${(r.elapsedMs / 1000).toFixed(1)} s`,
  ]);
  const header = ["mutant", "file", "outcome", "time"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  const killed = results.filter((r) => r.outcome.status === "killed").length;
  return [
    line(header),
    `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`,
    ...rows.map(line),
    `${killed} of ${results.length} mutants killed`,
  ].join("\n");
}
