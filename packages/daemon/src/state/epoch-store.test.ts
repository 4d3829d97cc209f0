// Proves the epoch store round-trips, starts at 0, survives a leftover temporary file, and
// refuses a corrupt file instead of guessing.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EpochStore } from "./epoch-store.js";

const fresh = () => mkdtempSync(join(tmpdir(), "vgpu-epoch-"));

describe("epoch store", () => {
  it("reads 0 before anything was written, then what was written", () => {
    const store = new EpochStore(join(fresh(), "nested"));
    expect(store.read()).toBe(0);
    store.write(7);
    expect(new EpochStore(store["dir"]).read()).toBe(7);
    store.write(8);
    expect(store.read()).toBe(8);
  });

  it("ignores a leftover temporary file", () => {
    const dir = fresh();
    const store = new EpochStore(dir);
    store.write(3);
    writeFileSync(join(dir, "epoch.tmp"), "99\n");
    expect(store.read()).toBe(3);
  });

  it("refuses a corrupt epoch file", () => {
    const dir = fresh();
    writeFileSync(join(dir, "epoch"), "banana\n");
    expect(() => new EpochStore(dir).read()).toThrow(/not an epoch/);
  });
});
