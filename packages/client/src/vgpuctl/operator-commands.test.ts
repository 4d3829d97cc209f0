// Proves `vgpuctl history` merging: both nodes' lists become one, oldest first, a change that
// both report (or one asked twice) appears once.
import { describe, expect, it } from "vitest";
import { mergeHistories } from "./operator-commands.js";
import type { RoleChange } from "./ops-client.js";

const change = (node: string, at: string, epoch: number, to: string): RoleChange => ({
  at,
  node,
  epoch,
  from: to === "primary" ? "standby" : "primary",
  to,
  reason: "switchover",
  seq: 5,
  by: "peer",
});

describe("mergeHistories", () => {
  it("interleaves the nodes' changes by time and drops repeats", () => {
    const a1 = change("a", "2026-01-01T00:00:01.000Z", 1, "primary");
    const a2 = change("a", "2026-01-01T00:05:00.002Z", 2, "standby");
    const b1 = change("b", "2026-01-01T00:00:02.000Z", 1, "standby");
    const b2 = change("b", "2026-01-01T00:05:00.001Z", 2, "primary");
    expect(mergeHistories([[a1, a2], [b1, b2, b2], [a2]])).toEqual([a1, b1, b2, a2]);
  });
});
