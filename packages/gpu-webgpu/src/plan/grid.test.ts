// Proves the workgroup grids and reduce passes: a 2-D grid covers every workgroup with at most
// the per-dimension limit in each dimension, and reduce_sum_f32's passes follow contract v2
// (n ≤ 2048 one pass; 2048²+1 three; n = 0 none).
import { describe, expect, it } from "vitest";
import { gridFor, groupsOf256, reducePassLengths } from "./grid.js";

describe("gridFor", () => {
  it("keeps small launches one-dimensional and folds large ones into rows", () => {
    expect(gridFor(0, 65535)).toEqual({ x: 0, y: 0, groups: 0 });
    expect(gridFor(65535, 65535)).toEqual({ x: 65535, y: 1, groups: 65535 });
    const g = gridFor(65536, 65535);
    expect(g).toEqual({ x: 32768, y: 2, groups: 65536 });
    for (const groups of [1, 7, 65536, 1 << 20, 65535 * 65535]) {
      const grid = gridFor(groups, 65535);
      expect(grid.x * grid.y).toBeGreaterThanOrEqual(groups);
      expect(grid.x * grid.y - groups).toBeLessThan(grid.y);
      expect(grid.x).toBeLessThanOrEqual(65535);
      expect(grid.y).toBeLessThanOrEqual(65535);
    }
  });

  it("refuses more workgroups than a 2-D grid holds", () => {
    expect(() => gridFor(65535 * 65535 + 1, 65535)).toThrow(/2-D grid/);
  });

  it("counts 256-invocation workgroups", () => {
    expect([0, 1, 256, 257].map(groupsOf256)).toEqual([0, 1, 1, 2]);
  });
});

describe("reducePassLengths", () => {
  it("halves by blocks of 2048 until one value is left", () => {
    expect(reducePassLengths(0, 2048)).toEqual([]);
    expect(reducePassLengths(1, 2048)).toEqual([1, 1]);
    expect(reducePassLengths(2048, 2048)).toEqual([2048, 1]);
    expect(reducePassLengths(2049, 2048)).toEqual([2049, 2, 1]);
    expect(reducePassLengths(2048 * 2048 + 1, 2048)).toEqual([2048 * 2048 + 1, 2049, 2, 1]);
  });
});
