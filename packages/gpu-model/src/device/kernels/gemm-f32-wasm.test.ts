// Proves gemm_f32's WebAssembly bytes are the current assembly of gemm-f32-wat.ts (as generated
// code is checked), and that a launch whose matrices outgrow the shared instance's memory
// (64 MiB) runs in an instance of its own and still computes C.

import { describe, expect, it } from "vitest";
import wabtInit from "wabt";
import { gemmF32Kernel } from "./gemm-f32.js";
import { GEMM_F32_WASM_BASE64 } from "./gemm-f32-wasm.js";
import { gemmWat } from "./gemm-f32-wat.js";
import { makeBuffer, pagesFor } from "./test-support.js";

describe("gemm_f32 WebAssembly tiles", () => {
  it("are the current assembly of gemm-f32-wat.ts (npm run generate:wasm)", async () => {
    const wabt = await wabtInit();
    const module = wabt.parseWat("gemm-f32.wat", gemmWat(), { simd: true });
    module.validate();
    const bytes = Buffer.from(module.toBinary({}).buffer).toString("base64");
    expect(bytes).toBe(GEMM_F32_WASM_BASE64);
  });

  it("run a launch larger than the shared memory in an instance of their own", () => {
    // A 4×2^21 and B 2^21×8 of ones: 96 MiB in the module's memory; each c = 2^21 exactly.
    const m = 4;
    const n = 8;
    const k = 2 ** 21;
    const a = makeBuffer(2, pagesFor(m * k));
    const b = makeBuffer(3, pagesFor(k * n));
    a.f32.fill(1);
    b.f32.fill(1);
    const c = makeBuffer(1, 1);
    gemmF32Kernel.run([c, a, b, m, n, k]);
    expect([...c.f32.subarray(0, m * n)]).toEqual(new Array(m * n).fill(k));
  });
});
