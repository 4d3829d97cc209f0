// Proves the golden-vector check without a GPU: the operations it submits for a case, run on
// the model's DeviceCore, give the model's golden hash (so a GPU running them is compared with
// the right bits), and a hash source that differs on one case is refused with an error naming
// that case's kernel, while one that agrees on every case passes.
import {
  DeviceCore,
  type GoldenCase,
  goldenOutputHash,
  goldenVectors,
  modelGoldenHashes,
} from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { compareGolden, GoldenMismatchError, goldenCaseOps } from "./golden.js";

function hashOnCore(c: GoldenCase): string {
  const core = new DeviceCore();
  const results = goldenCaseOps(c).map((op) => core.execute(op));
  const first = c.buffers.length * 2 + 1;
  return goldenOutputHash(
    c.buffers.map((_, i) => new Uint32Array((results[first + i] as Uint8Array).slice().buffer)),
  );
}

describe("golden vectors", () => {
  const cases = goldenVectors();
  const model = modelGoldenHashes();

  it("submits operations that reproduce the model's hash of every case", () => {
    const want = new Map(model.map((h) => [h.name, h.hash]));
    for (const c of cases) expect(hashOnCore(c), c.name).toBe(want.get(c.name));
  });

  it("covers every kernel", async () => {
    const report = await compareGolden(cases, model, async (c) => hashOnCore(c));
    expect(report.cases).toBe(cases.length);
    expect([...report.kernels].sort()).toEqual(
      [
        "add_u32",
        "copy",
        "fill",
        "gemm_f32",
        "histogram_u32",
        "increment_u32",
        "reduce_sum_f32",
        "saxpy_f32",
        "stencil2d_f32",
      ].sort(),
    );
  });

  it("refuses a backend that differs on one case, naming its kernel", async () => {
    const bad = cases.find((c) => c.kernel === "stencil2d_f32")!;
    const hashes = new Map(model.map((h) => [h.name, h.hash]));
    const actual = async (c: GoldenCase) => (c === bad ? "0".repeat(64) : hashes.get(c.name)!);
    const error = await compareGolden(cases, model, actual).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GoldenMismatchError);
    expect((error as GoldenMismatchError).kernel).toBe("stencil2d_f32");
    expect((error as Error).message).toMatch(/kernel stencil2d_f32/);
    expect((error as Error).message).toContain(bad.name);
  });
});
