// Pins the CPU model's golden-vector hashes (contract v2): any change to what a kernel computes
// on these inputs, or to the inputs, shows here, so it is made on purpose (and the contract
// version raised when the semantics change). Also proves the golden set covers every kernel,
// has unique names, leaves its inputs untouched, and that the output hash sees a single bit.
import { describe, expect, it } from "vitest";
import { KERNEL_CONTRACT_VERSION } from "./contract.js";
import {
  goldenOutputHash,
  goldenVectors,
  modelGoldenHashes,
  runGoldenCaseOnModel,
} from "./golden-vectors.js";
import { KERNELS } from "./index.js";

/** The model's hashes under contract v2, by case. */
const PINNED: Record<string, string> = {
  "fill/odd-count": "e579bc300285418973ed2d57db89b3d6966cf28280fb952ee858fa54b22d8f0c",
  "copy/bits-kept": "25bcd7df2e986aa60bc7e95efced8b6fe7d03e72850804df6a3b62fbc2afedec",
  "add_u32/wrap": "14ac4cb155a55a77e2b94b2ed4457a92b0eec38ef174045c10545c32b739ee87",
  "increment_u32/wrap": "040047ff27a84c06c1c8eababce54beac2a78181a76a0f24a4c6dd3e80400a70",
  "histogram_u32/odd-bins": "7a4bf5d0fa8cfe965ccdaa62e5ba3062394cbefbfad32d64d9f28354120d7ae1",
  "saxpy_f32/special-pairs-a=0.5":
    "0201aa8de4a37abbe0acfd2a6f08f4e81cf58fb63c8317d9af441e8fd2f24140",
  "saxpy_f32/special-pairs-a=-0":
    "a813637a2cc0675f302c644f1beb7b82c20ffde8c34f6cfe8b8c3d474954a90e",
  "saxpy_f32/special-pairs-a=subnormal":
    "5970fdea247a22021ff006f13f89d8e6e0903cf7f81bc062e90ca4578be52d80",
  "saxpy_f32/special-pairs-a=-subnormal":
    "a813637a2cc0675f302c644f1beb7b82c20ffde8c34f6cfe8b8c3d474954a90e",
  "saxpy_f32/special-pairs-a=2^-64":
    "bf30dc28cde47ba794fcbd23fb3e9ca778a06378135a125eaca8ea99d15ce78f",
  "saxpy_f32/special-pairs-a=NaN":
    "f2271908b085c24d1a745a14e214a097fd23449a40f4cd26430401778a02e8ce",
  "saxpy_f32/special-pairs-a=-inf":
    "94438f1de866903d8e1e91bc7c59ba309892ca2274fea52292f15ee8d39963ea",
  "saxpy_f32/mixed-odd-n": "dd3cd2a8cd3eee47769bb792f1beac0d6e3292adcf892517ce219cfafd8e9f1f",
  "saxpy_f32/y-is-x": "e4d9b2e34f470992a05e36a861307f4734ef787a73dedfd7d2d6215e147af9d4",
  "gemm_f32/1x1x1": "96575a6ae9b87013d92b1151380d95679ab20517484c533ef728fc48d1c187e9",
  "gemm_f32/k=0": "ae7e95974bab8c678f03b9becb716d701abdf3e3a2c384995396c3e72639cee0",
  "gemm_f32/mixed-5x7x9": "53ff384f07fd46d1c18ad44bf2d6e3d3bd7e720877dd59f7849acf336fd7bc11",
  "gemm_f32/mixed-17x19x33": "0085ed87cc58392688ca321d5d814c3d3bf12df3c6ab0b58d6ebeb692f3e7645",
  "gemm_f32/ordinary-64x64x64": "0037d94826e4ff79ce2cc3783b3c7a5b79c4b1d9aff3ecfeabd3f2a68681a939",
  "gemm_f32/ordinary-13x35x300": "a81387f7d8ba81818b7d13e000835d88eea6eecee7a758c03f744a0b7c886706",
  "gemm_f32/tiny-products-9x10x11":
    "ef48a364b7c83e38ea91edad409c9e1ad526390ee44942fc47de678f6b2dc04a",
  "gemm_f32/cancel-8x8x16": "4888133270f47ee2fc98d0ac94ae530510741311b4887f285e39aad001b93770",
  "gemm_f32/near-2^-102-12x12x12":
    "54ec69503b4b3f756da2e81786dce2d3e10053ff9a3b112e5f6c0e2d5110c449",
  "reduce_sum_f32/n=0": "72079ff01cafa8f9e6010bcc6b321fa289b3d6a98fa53f43440d5b0b55b4e086",
  "reduce_sum_f32/mixed-n=1": "351f695f84c532d6e98419752fe563f7bfe132d06e5a30b8caed50c0fdeffe61",
  "reduce_sum_f32/mixed-n=255": "e2b32adf28caedb338ae9ee571cfda05ec6225a7229c48ef6310d1d742c211fc",
  "reduce_sum_f32/mixed-n=256": "51eeb8a17638a1340e83d63e59115b4a6dbfb81060df33aef7fe629e9c101a16",
  "reduce_sum_f32/mixed-n=2047": "15703b62d079624750845f9113fc1e7c028ff3a9ae1af5fe62ee17cffae36168",
  "reduce_sum_f32/mixed-n=2048": "12dd9fb610ffc6179bca1d3ff53240508a5f6e504421dd4396ddbad2e21ee0f7",
  "reduce_sum_f32/mixed-n=2049": "0deafbbcb5f84046c52e20fd75ba150611cac9579707f3169039e0fa0ba4bd0f",
  "reduce_sum_f32/mixed-n=4194305":
    "cea6b1e915a98b3edf156d1c53e6704b6717a01ce244c395c3b047fe3c1479ce",
  "reduce_sum_f32/negative-zeros":
    "13b73328656c72a5414f3429c9d57fad0ff7b6010168a3d423dba6132ec63f6f",
  "reduce_sum_f32/subnormals": "ccfc35cf5f6f840a6eb112e8c1310310c88a91f723994021f96759a3f06cfe80",
  "reduce_sum_f32/cancel-to-subnormal":
    "bb93ace3628e6b9f09a3addf306222aebdf76ff2e84cc2f02cf2b1c6249e45f5",
  "reduce_sum_f32/nan-payload": "9c5f2f632e7796699ed527f37af62a6b82f8c8f4f65ada8c0677fc2e7397a187",
  "reduce_sum_f32/inf-minus-inf":
    "ae60195cff315e7cb2f43fc0c5487dc912e9938bed8a6d21de47404274de8372",
  "reduce_sum_f32/tree-order": "4066e642ff07851d0a23af6914001604d323cefb3a87864083148db0a2e15c7a",
  "stencil2d_f32/1x1": "a4cd505b0762481f1d3048f9864e836a078d4ec038e4214af912892510c95ec1",
  "stencil2d_f32/copy-bits": "2eb7231a351fbd9991305a0178673476421a05d7e001e78f5ba92b3ccf85784b",
  "stencil2d_f32/mixed-7x5": "8f86986ac23f06daf9fa8aa8a4986096ed677763895b62ddc2686fd274941a51",
  "stencil2d_f32/ordinary-33x17":
    "58e099cab38d1a99882412680a0f534740870ddb529e3725e61549cd82ec356a",
  "stencil2d_f32/tiny-9x9": "dc2a649ad5e2a24072cf149808c98aadf3141be98704f3835248731746989212",
  "stencil2d_f32/alpha-subnormal":
    "25fa283ae52f65bd402633809ab6638cb8077f99c8d19a50f3d08cb229859025",
};

describe("golden vectors", () => {
  it("belong to contract v2", () => {
    expect(KERNEL_CONTRACT_VERSION).toBe(2);
  });

  it("give the pinned hashes on the model", () => {
    const hashes = modelGoldenHashes();
    expect(Object.fromEntries(hashes.map((h) => [h.name, h.hash]))).toEqual(PINNED);
    for (const h of hashes) expect(h.name.startsWith(`${h.kernel}/`)).toBe(true);
  });

  it("cover every kernel, with unique names, and leave the cases' inputs untouched", () => {
    const cases = goldenVectors();
    expect(new Set(cases.map((c) => c.kernel))).toEqual(new Set(KERNELS.keys()));
    expect(new Set(cases.map((c) => c.name)).size).toBe(cases.length);
    for (const c of cases.filter((x) => x.buffers.every((b) => b.length < 100_000))) {
      const before = c.buffers.map((b) => b.slice());
      const after = runGoldenCaseOnModel(c);
      expect(c.buffers).toEqual(before);
      expect(after.map((b) => b.length)).toEqual(before.map((b) => b.length));
    }
  });

  it("hash every word of every buffer, and the buffers' lengths", () => {
    const a = Uint32Array.of(1, 2, 3);
    const base = goldenOutputHash([a, Uint32Array.of(4)]);
    expect(goldenOutputHash([Uint32Array.of(1, 2, 3 ^ 0x80000000), Uint32Array.of(4)])).not.toBe(
      base,
    );
    expect(goldenOutputHash([Uint32Array.of(1, 2), Uint32Array.of(3, 4)])).not.toBe(base);
    expect(goldenOutputHash([a.subarray(1)])).toBe(goldenOutputHash([Uint32Array.of(2, 3)]));
  });
});
