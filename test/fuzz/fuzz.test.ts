// Runs every fuzz target (test/fuzz/targets.ts) on the fixed seed of test/setup/fast-check.ts
// with its default number of runs; `npm run fuzz -- --runs N` runs them longer.
import fc from "fast-check";
import { describe, it } from "vitest";
import { FUZZ_TARGETS } from "./targets.js";

describe("fuzzing", () => {
  it.each(FUZZ_TARGETS.map((t) => [t.name, t] as const))("%s", async (_, target) => {
    await fc.assert(target.property(), { numRuns: target.defaultRuns });
  });
});
