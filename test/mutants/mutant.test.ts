// Proves the mutant tool's own logic: an anchor standing once as whole lines is replaced there
// and nowhere else; one found zero or several times, or inside a changed line, is a stale mutant
// (an error, never a pass); names select mutants strictly; a simulator's first failing seed is
// read from its replay line; and every mutant of the table has a live anchor in this tree (a
// moved line fails here, in `npm test`).
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  allKilled,
  applyMutant,
  firstFailingSeed,
  formatTable,
  lineMatches,
  type Mutant,
  type MutantResult,
  StaleMutantError,
  selectMutants,
} from "./mutant.js";
import { MUTANTS } from "./table.js";

const mutant = (original: string, replacement: string, name = "m"): Mutant => ({
  name,
  what: "a test mutant",
  file: "x.ts",
  original,
  replacement,
});

describe("applyMutant", () => {
  const source = "a();\n  if (x) return undefined;\nb();\n";

  it("replaces an anchor found once, and only it", () => {
    expect(applyMutant(source, mutant("  if (x) return undefined;", "  return 1;"))).toBe(
      "a();\n  return 1;\nb();\n",
    );
  });

  it("refuses an anchor that is not found", () => {
    const m = mutant("  if (y) return undefined;", "  return 1;");
    expect(() => applyMutant(source, m)).toThrow(StaleMutantError);
    expect(() => applyMutant(source, m)).toThrow(/not in the file/);
  });

  it("refuses an anchor found twice", () => {
    const twice = "  x();\nb();\n  x();\n";
    expect(() => applyMutant(twice, mutant("  x();", "  y();"))).toThrow(/occur 2 times/);
  });

  it("matches whole lines only: a line changed in any way is stale", () => {
    const commented = "a();\n  if (x) return undefined; // moved\n";
    expect(() =>
      applyMutant(commented, mutant("  if (x) return undefined;", "  return 1;")),
    ).toThrow(/not in the file/);
    expect(() => applyMutant(source, mutant("if (x) return undefined;", "return 1;"))).toThrow(
      StaleMutantError,
    );
    expect(applyMutant("a();\r\nb();\r\n", mutant("b();", "c();"))).toBe("a();\r\nc();\r\n");
  });

  it("accepts an anchor made unique by the line before it", () => {
    const twice = "f(a);\n  x;\ng(b);\n  x;\n";
    expect(() => applyMutant(twice, mutant("  x;", "  y;"))).toThrow(StaleMutantError);
    expect(applyMutant(twice, mutant("g(b);\n  x;", "g(b);\n  y;"))).toBe(
      "f(a);\n  x;\ng(b);\n  y;\n",
    );
  });

  it("refuses an empty anchor and a replacement equal to the original", () => {
    expect(() => applyMutant(source, mutant("", "x"))).toThrow(StaleMutantError);
    expect(() => applyMutant(source, mutant("b();", "b();"))).toThrow(/equals the original/);
  });

  it("changes exactly the anchor's lines: the lines around them are kept", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), (before, after, replacement) => {
        const anchor = "\u0000ANCHOR\u0000";
        fc.pre(!before.includes("\u0000") && !after.includes("\u0000"));
        fc.pre(replacement !== anchor);
        const text = `${before}\n${anchor}\n${after}`;
        const out = applyMutant(text, mutant(anchor, replacement));
        expect(out).toBe(`${before}\n${replacement}\n${after}`);
      }),
    );
  });
});

describe("lineMatches", () => {
  it("finds the needle only where it spans whole lines", () => {
    expect(lineMatches("ab\nab\nxab\n", "ab")).toEqual([0, 3]);
    expect(lineMatches("a\nb\nc", "b\nc")).toEqual([2]);
    expect(lineMatches("abc", "")).toEqual([]);
  });
});

describe("selectMutants", () => {
  const table = [mutant("a", "b", "one"), mutant("c", "d", "two")];

  it("selects all without names, else the named ones", () => {
    expect(selectMutants(table, []).map((m) => m.name)).toEqual(["one", "two"]);
    expect(selectMutants(table, ["two"]).map((m) => m.name)).toEqual(["two"]);
  });

  it("refuses an unknown name and a table with a name twice", () => {
    expect(() => selectMutants(table, ["three"])).toThrow(/no mutant named three/);
    expect(() => selectMutants([...table, table[0]!], [])).toThrow(/share a name/);
  });
});

describe("firstFailingSeed", () => {
  it("reads the seed of the first failure's replay line", () => {
    const output = [
      "simulating failover on 300 seeds from 1",
      "FAIL released reply of frame 3 lost",
      "  params: …",
      "  replay: npm run sim -- --failover --seed 17 --seeds 1 --verbose [--trace]",
      "FAIL another",
      "  replay: npm run sim -- --failover --seed 40 --seeds 1 --verbose [--trace]",
    ].join("\n");
    expect(firstFailingSeed(output)).toBe(17);
  });

  it("finds none before a failure's replay line has arrived", () => {
    expect(firstFailingSeed("simulating 300 seeds from 1\n")).toBeUndefined();
    expect(firstFailingSeed("FAIL gap applied\n  params: seed=4")).toBeUndefined();
  });
});

describe("formatTable and allKilled", () => {
  const results: MutantResult[] = [
    {
      name: "one",
      file: "a.ts",
      outcome: { status: "killed", by: { suite: "failover-sim", where: "seed 3" } },
      elapsedMs: 1500,
    },
    { name: "two", file: "b.ts", outcome: { status: "survived" }, elapsedMs: 2000 },
  ];

  it("names the killer of each mutant and counts the dead", () => {
    const table = formatTable(results);
    expect(table).toContain("killed by failover-sim (seed 3)");
    expect(table).toContain("SURVIVED");
    expect(table).toContain("1 of 2 mutants killed");
  });

  it("passes only when every mutant is killed", () => {
    expect(allKilled(results)).toBe(false);
    expect(allKilled(results.slice(0, 1))).toBe(true);
    const invalid: MutantResult = {
      ...results[0]!,
      outcome: { status: "invalid", detail: "error TS2322" },
    };
    expect(allKilled([invalid])).toBe(false);
  });
});

describe("the mutant table", () => {
  it.each(
    MUTANTS.map((m) => [m.name, m] as const),
  )("%s: its anchor occurs once in shipped code", (_, m) => {
    expect(m.file).toMatch(/^packages\/[^/]+\/src\//);
    const source = readFileSync(new URL(`../../${m.file}`, import.meta.url), "utf8");
    expect(applyMutant(source, m)).not.toBe(source);
  });

  it("has the six mutants issue #13 names", () => {
    const named = [
      "release-all",
      "fenced-answers",
      "promote-ineligible",
      "promote-unpersisted",
      "stepdown-keeps-state",
      "apply-out-of-order",
    ];
    expect(selectMutants(MUTANTS, named).map((m) => m.name)).toEqual(named);
  });
});
