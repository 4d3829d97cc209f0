// Proves each failover scenario file (test/scenarios/*.yaml, format in README.md) holds: its
// steps run on the failover simulator with no random faults, every expectation between them is
// met, and the simulator's safety checks hold at every event (and its final checks where the
// scenario settles). One runner for every file: adding a case is adding a file.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseScenario, runScenario } from "./scenario.js";

// Compiled to test/dist/scenarios; the YAML files stay beside the source.
const here = dirname(fileURLToPath(import.meta.url));
const folder = here.includes(`${join("dist", "scenarios")}`)
  ? join(here, "..", "..", "scenarios")
  : here;
const files = readdirSync(folder)
  .filter((f) => f.endsWith(".yaml"))
  .sort();

describe("failover scenarios", () => {
  it("has scenario files", () => expect(files.length).toBeGreaterThan(0));

  it.each(files)("%s", (file) => {
    const scenario = parseScenario(readFileSync(join(folder, file), "utf8"));
    runScenario(scenario);
  });
});
