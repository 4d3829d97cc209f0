// Proves the role-change history appends across store instances (a restart), returns oldest
// first, keeps only the newest entries on read, and skips a line torn by a crash.
import { appendFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { HISTORY_FILE, HistoryStore, type RoleChange } from "./history-store.js";

const change = (epoch: number, to = "primary"): RoleChange => ({
  at: new Date(1_700_000_000_000 + epoch).toISOString(),
  node: "node-a",
  epoch,
  from: "standby",
  to,
  reason: "lease_expired",
  seq: epoch * 10,
  by: "automatic",
});

describe("history store", () => {
  it("is empty at first, then keeps what was appended, across instances", () => {
    const dir = mkdtempSync(join(tmpdir(), "vgpu-history-"));
    expect(new HistoryStore(dir).read()).toEqual([]);
    new HistoryStore(dir).append(change(1));
    new HistoryStore(dir).append(change(2, "standby"));
    expect(new HistoryStore(dir).read()).toEqual([change(1), change(2, "standby")]);
  });

  it("returns only the newest entries when asked for fewer", () => {
    const dir = mkdtempSync(join(tmpdir(), "vgpu-history-"));
    const store = new HistoryStore(dir);
    for (let e = 1; e <= 5; e++) store.append(change(e));
    expect(store.read(2).map((c) => c.epoch)).toEqual([4, 5]);
  });

  it("skips a torn line and keeps appending after it", () => {
    const dir = mkdtempSync(join(tmpdir(), "vgpu-history-"));
    const store = new HistoryStore(dir);
    store.append(change(1));
    appendFileSync(join(dir, HISTORY_FILE), '{"at":"2026-');
    appendFileSync(join(dir, HISTORY_FILE), "\n");
    store.append(change(2));
    expect(store.read().map((c) => c.epoch)).toEqual([1, 2]);
  });
});
