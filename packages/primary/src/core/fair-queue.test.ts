// Proves the fair queue serves the tenant that used the least first, round-robin within a
// tenant, and gives an idle tenant no credit: simulated costs, no clock.
import { describe, expect, it } from "vitest";
import { FairQueue } from "./fair-queue.js";

/** Serves everything waiting, charging each item its cost; the keys in the order served. */
function drain(q: FairQueue<string>, cost: (item: string) => number): string[] {
  const order: string[] = [];
  for (let next = q.shift(); next; next = q.shift()) {
    order.push(next.item);
    q.charge(next.key, cost(next.item));
  }
  return order;
}

describe("FairQueue", () => {
  it("serves a cheap tenant's work before a costly tenant's backlog", () => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 5; i++) q.push("hostile", `h${i}`);
    q.push("normal", "n0");
    q.push("normal", "n1");
    const order = drain(q, (item) => (item.startsWith("h") ? 10 : 1));
    // Both start level; after one costly item the hostile tenant waits for the normal one.
    expect(order.slice(0, 4)).toEqual(["h0", "n0", "n1", "h1"]);
    expect(q.empty).toBe(true);
  });

  it("keeps a tenant's items in order and alternates tenants of equal cost", () => {
    const q = new FairQueue<string>();
    for (const i of [0, 1, 2]) q.push("a", `a${i}`);
    for (const i of [0, 1, 2]) q.push("b", `b${i}`);
    expect(q.size).toBe(6);
    expect(drain(q, () => 1)).toEqual(["a0", "b0", "a1", "b1", "a2", "b2"]);
  });

  it("gives a tenant that was idle no credit to run ahead with", () => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 100; i++) q.push("busy", `b${i}`);
    for (let i = 0; i < 90; i++) {
      const next = q.shift()!;
      q.charge(next.key, 1);
    }
    // "late" has used nothing, but joins at busy's level: they alternate from here.
    for (let i = 0; i < 3; i++) q.push("late", `l${i}`);
    expect(drain(q, () => 1).slice(0, 6)).toEqual(["b90", "l0", "b91", "l1", "b92", "l2"]);
  });

  it("drops waiting items on request", () => {
    const q = new FairQueue<string>();
    q.push("a", "x");
    q.push("a", "y");
    q.push("b", "x");
    q.remove((i) => i === "x");
    expect(q.size).toBe(1);
    expect(q.shift()).toEqual({ key: "a", item: "y" });
    expect(q.shift()).toBeUndefined();
  });
});
