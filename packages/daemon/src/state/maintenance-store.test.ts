// Proves maintenance mode persists (a restarted node stays paused), clears by removing the
// file, and refuses a corrupt record instead of guessing.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MaintenanceStore } from "./maintenance-store.js";

describe("maintenance store", () => {
  it("reads undefined until paused, the pause after, and undefined once resumed", () => {
    const dir = mkdtempSync(join(tmpdir(), "vgpu-maint-"));
    expect(new MaintenanceStore(dir).read()).toBeUndefined();
    new MaintenanceStore(dir).write({ sinceMs: 1234, by: "operator 127.0.0.1" });
    expect(new MaintenanceStore(dir).read()).toEqual({ sinceMs: 1234, by: "operator 127.0.0.1" });
    new MaintenanceStore(dir).write(undefined);
    expect(new MaintenanceStore(dir).read()).toBeUndefined();
  });

  it("refuses a corrupt record", () => {
    const dir = mkdtempSync(join(tmpdir(), "vgpu-maint-"));
    writeFileSync(join(dir, "maintenance"), '{"paused":1}\n');
    expect(() => new MaintenanceStore(dir).read()).toThrow(/not a maintenance record/);
  });
});
