// Proves bad kernel launches (unknown kernel, wrong argument count or slot type, buffers too
// small, forbidden aliasing, scalars out of range, work above the limit) are refused with
// BAD_KERNEL_ARGS or their own code and change no GPU state (testing/refusal-harness.ts).
import { ErrorCode } from "@vgpu-ha/common/core";
import { describe, it } from "vitest";
import { buf, expectRefused, f32, launch, setup, u32 } from "../testing/refusal-harness.js";

describe("kernel launches", () => {
  it("unknown kernel: UNKNOWN_KERNEL", () => {
    const { g, ctx, a } = setup();
    for (const name of ["nope", "", "FILL", "fill ", "__proto__", "constructor"]) {
      expectRefused(g, launch(ctx, name, [buf(a), u32(1), u32(1)]), ErrorCode.UNKNOWN_KERNEL);
    }
  });

  it("wrong argument count: BAD_KERNEL_ARGS", () => {
    const { g, ctx, a, b } = setup();
    expectRefused(g, launch(ctx, "fill", []), ErrorCode.BAD_KERNEL_ARGS);
    expectRefused(g, launch(ctx, "fill", [buf(a), u32(1)]), ErrorCode.BAD_KERNEL_ARGS);
    expectRefused(
      g,
      launch(ctx, "fill", [buf(a), u32(1), u32(1), u32(1)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(g, launch(ctx, "copy", [buf(a), buf(b)]), ErrorCode.BAD_KERNEL_ARGS);
  });

  it("wrong slot type: a scalar in a buffer slot, a buffer in a scalar slot", () => {
    const { g, ctx, a, b } = setup();
    expectRefused(g, launch(ctx, "fill", [u32(a), u32(1), u32(1)]), ErrorCode.BAD_KERNEL_ARGS);
    expectRefused(g, launch(ctx, "fill", [buf(a), buf(b), u32(1)]), ErrorCode.BAD_KERNEL_ARGS);
    expectRefused(
      g,
      launch(ctx, "saxpy_f32", [buf(a), buf(b), u32(1), u32(1)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "saxpy_f32", [buf(a), buf(b), f32(1), f32(1)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "increment_u32", [buf(a), { kind: "i32", value: 1 }, u32(1)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
  });

  it("buffer too small for n: BAD_KERNEL_ARGS", () => {
    const { g, ctx, a, b } = setup();
    // A holds 2048 u32 elements, B 1024.
    expectRefused(g, launch(ctx, "fill", [buf(a), u32(2049), u32(1)]), ErrorCode.BAD_KERNEL_ARGS);
    expectRefused(
      g,
      launch(ctx, "increment_u32", [buf(b), u32(1025), u32(1)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(g, launch(ctx, "copy", [buf(a), buf(b), u32(1025)]), ErrorCode.BAD_KERNEL_ARGS);
    expectRefused(
      g,
      launch(ctx, "gemm_f32", [buf(a), buf(b), buf(b), u32(64), u32(64), u32(1)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "gemm_f32", [buf(a), buf(b), buf(b), u32(65536), u32(65536), u32(0)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
  });

  it("forbidden aliasing (gemm c==a, c==b; reduce, stencil, histogram): BAD_KERNEL_ARGS", () => {
    const { g, ctx, a, b } = setup();
    const one = u32(1);
    expectRefused(
      g,
      launch(ctx, "gemm_f32", [buf(a), buf(a), buf(b), one, one, one]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "gemm_f32", [buf(a), buf(b), buf(a), one, one, one]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "reduce_sum_f32", [buf(a), buf(a), one]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "stencil2d_f32", [buf(a), buf(a), one, one, one, f32(0.5)]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    expectRefused(
      g,
      launch(ctx, "histogram_u32", [buf(a), buf(a), one, one]),
      ErrorCode.BAD_KERNEL_ARGS,
    );
    // a may alias b in gemm: that one runs.
    g.ok({
      op: "kernelLaunch",
      context: ctx,
      kernel: "gemm_f32",
      args: [buf(a), buf(b), buf(b), one, one, one],
    });
  });

  it("scalar out of range (u32 -1, 2^32, 0.5, NaN; f32 0.1, 1e40): BAD_KERNEL_ARGS", () => {
    const { g, ctx, a, b } = setup();
    for (const value of [-1, 2 ** 32, 0.5, Number.NaN, Infinity]) {
      expectRefused(
        g,
        launch(ctx, "fill", [buf(a), u32(1), u32(value)]),
        ErrorCode.BAD_KERNEL_ARGS,
      );
      expectRefused(
        g,
        launch(ctx, "fill", [buf(a), u32(value), u32(1)]),
        ErrorCode.BAD_KERNEL_ARGS,
      );
    }
    for (const value of [0.1, 1e40, -1e-50, 1 / 3]) {
      expectRefused(
        g,
        launch(ctx, "saxpy_f32", [buf(a), buf(b), u32(1), f32(value)]),
        ErrorCode.BAD_KERNEL_ARGS,
      );
    }
    // Exact float32 values (and NaN) are fine.
    g.ok({
      op: "kernelLaunch",
      context: ctx,
      kernel: "saxpy_f32",
      args: [buf(a), buf(b), u32(1), f32(Math.fround(0.1))],
    });
  });

  it("work above maxKernelWork: LIMIT_EXCEEDED", () => {
    const { g, ctx, a, b } = setup({ device: { maxKernelWork: 1000 } });
    expectRefused(g, launch(ctx, "fill", [buf(a), u32(1001), u32(1)]), ErrorCode.LIMIT_EXCEEDED);
    expectRefused(
      g,
      launch(ctx, "gemm_f32", [buf(a), buf(b), buf(b), u32(10), u32(10), u32(11)]),
      ErrorCode.LIMIT_EXCEEDED,
    );
    expectRefused(
      g,
      launch(ctx, "histogram_u32", [buf(a), buf(b), u32(1000), u32(1)]),
      ErrorCode.LIMIT_EXCEEDED,
    );
    g.ok({ op: "kernelLaunch", context: ctx, kernel: "fill", args: [buf(a), u32(1000), u32(1)] });
  });
});
