// Proves the slab-cut value summaries are byte for byte what the previous per-call DataView
// encoding gave (kind byte, float64 LE), that a summary is never overwritten by later ones
// (across slab boundaries), and that sameSummary compares codes and digests without copying.
import { type CallResult, ErrorCode } from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { sameBytes, sameSummary, summarizeResult } from "./result-summary.js";

/** The previous encoding, verbatim: a new ArrayBuffer and DataView per summary. */
function previousValueDigest(kind: "handle" | "fence", value: number): Uint8Array {
  const bytes = new Uint8Array(9);
  bytes[0] = kind === "handle" ? 1 : 2;
  new DataView(bytes.buffer).setFloat64(1, value, true);
  return bytes;
}

const result = (output: CallResult["output"], code = ErrorCode.OK): CallResult => ({
  code,
  message: "",
  output,
});

const valueArb = fc.oneof(
  fc.nat({ max: 2 ** 32 - 1 }),
  fc.maxSafeNat(),
  fc.double({ noNaN: true }),
);

describe("summarizeResult", () => {
  it("summarises handles and fence values as the DataView encoding did, and keeps every summary", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom("handle" as const, "fence" as const), valueArb), {
          minLength: 1,
          maxLength: 50,
        }),
        (outputs) => {
          const summaries = outputs.map(([kind, v]) =>
            summarizeResult(
              result(kind === "handle" ? { kind, handle: v } : { kind: "fence", value: v }),
            ),
          );
          outputs.forEach(([kind, v], i) => {
            expect([...summaries[i]!.outputDigest]).toEqual([...previousValueDigest(kind, v)]);
          });
        },
      ),
    );
  });

  it("keeps earlier summaries intact across many slabs", () => {
    const n = 3 * 4096 + 17;
    const digests = Array.from(
      { length: n },
      (_, i) => summarizeResult(result({ kind: "fence", value: i })).outputDigest,
    );
    digests.forEach((d, i) => {
      expect(d.byteLength).toBe(9);
      expect([...d]).toEqual([...previousValueDigest("fence", i)]);
    });
  });

  it("gives no output an empty digest and data the first 16 bytes of its SHA-256", () => {
    expect(summarizeResult(result({ kind: "none" })).outputDigest.byteLength).toBe(0);
    const data = summarizeResult(result({ kind: "data", data: new Uint8Array([1, 2, 3]) }));
    expect(Buffer.from(data.outputDigest).toString("hex")).toBe("039058c6f2c0cb492c533b0a4d14ef77");
  });
});

describe("sameSummary", () => {
  it("is equality of code and digest bytes", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 20 }),
        fc.uint8Array({ maxLength: 20 }),
        fc.boolean(),
        (a, b, sameCode) => {
          const x = { code: ErrorCode.OK, outputDigest: a };
          const y = { code: sameCode ? ErrorCode.OK : ErrorCode.OUT_OF_BOUNDS, outputDigest: b };
          const expected = sameCode && Buffer.from(a).equals(Buffer.from(b));
          expect(sameSummary(x, y)).toBe(expected);
          expect(sameBytes(a, b)).toBe(Buffer.from(a).equals(Buffer.from(b)));
        },
      ),
    );
  });

  it("compares views at any offset of their buffers", () => {
    const slab = new Uint8Array([9, 1, 2, 3, 1, 2, 3]);
    expect(sameBytes(slab.subarray(1, 4), slab.subarray(4, 7))).toBe(true);
    expect(sameBytes(slab.subarray(0, 3), slab.subarray(4, 7))).toBe(false);
  });
});
