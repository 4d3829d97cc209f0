// Proves what can be checked of the WGSL without a GPU: every kernel of the model's library has
// a launch encoder, every shader is one compute entry point `main` with bindings 0..n numbered
// without gaps and balanced braces, float kernels store through canonbits and flush with ftz,
// and every product that feeds a sum is kept from fusing (`* p.one`).
import { KERNELS } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { LAUNCH_KERNELS } from "../encode-launch.js";
import { SHADER_NAMES, SHADERS, shaderSource } from "./index.js";

describe("WGSL", () => {
  it("has a launch for every kernel of the model", () => {
    expect([...LAUNCH_KERNELS].sort()).toEqual([...KERNELS.keys()].sort());
  });

  it.each(SHADER_NAMES)("%s is one compute entry point with bindings 0..n", (name) => {
    const source = shaderSource(name);
    expect(source.match(/@compute/g)).toHaveLength(1);
    expect(source).toMatch(/fn main\(/);
    const bindings = [...source.matchAll(/@binding\((\d+)\)/g)].map((m) => Number(m[1]));
    expect(bindings).toEqual(bindings.map((_, i) => i));
    expect(source.split("{").length).toBe(source.split("}").length);
    expect(source.split("(").length).toBe(source.split(")").length);
  });

  it.each([
    ["saxpy_f32", ["x"]],
    ["gemm_f32", ["a", "b"]],
    ["reduce_pass", ["x"]],
    ["stencil_step", ["src"]],
  ] as const)("%s flushes every float it loads and stores canonical NaNs", (name, inputs) => {
    const body = SHADERS[name];
    expect(body).toMatch(/canonbits\(/);
    for (const input of inputs) {
      const loads = [...body.matchAll(new RegExp(`[^A-Za-z_]${input}\\[`, "g"))];
      expect(loads.length).toBeGreaterThan(0);
      for (const m of loads) expect(body.slice(m.index - 3, m.index + 1)).toBe("ftz(");
    }
  });

  it.each([
    "saxpy_f32",
    "gemm_f32",
    "stencil_step",
  ] as const)("%s adds a float product only through `* p.one` (no fused multiply-add)", (name) => {
    // Index arithmetic inside [...] is integer: leave it out.
    const lines = SHADERS[name]
      .split("\n")
      .map((l) => l.replace(/\[[^\]]*\]/g, "[]"))
      .filter((l) => /ftz\(/.test(l) && /\+/.test(l));
    const sums = lines.filter((l) => /\*/.test(l));
    expect(sums.length).toBeGreaterThan(0);
    for (const line of sums) expect(line).toMatch(/\* p\.one \+/);
  });
});
