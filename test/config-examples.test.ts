// Proves every example configuration under deploy/examples loads and validates.
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { loadConfig } from "@vgpu-ha/common";
import { describe, expect, it } from "vitest";

const dir = fileURLToPath(new URL("../deploy/examples/", import.meta.url));
const examples = readdirSync(dir).filter((f) => /\.(ya?ml|json)$/.test(f));

describe("deploy/examples", () => {
  it("has examples", () => expect(examples.length).toBeGreaterThan(0));
  it.each(examples)("%s is a valid configuration", (file) => {
    expect(() => loadConfig({ file: dir + file })).not.toThrow();
  });
});
