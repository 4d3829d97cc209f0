// The summary of a call's result that the standby compares with its own: the code and a
// 16-byte digest of the canonical output.
import { createHash } from "node:crypto";
import type { CallResult, ResultSummary } from "@vgpu-ha/common/core";

const NONE = new Uint8Array(0);

/**
 * A handle or fence value is summarised by itself (9 bytes: a kind byte and the value), data by
 * the first 16 bytes of its SHA-256: cheap for the common small outputs, exact for all.
 */
export function summarizeResult(result: CallResult): ResultSummary {
  const out = result.output;
  if (out.kind === "none") return { code: result.code, outputDigest: NONE };
  if (out.kind === "data") {
    const digest = createHash("sha256").update(out.data).digest().subarray(0, 16);
    return { code: result.code, outputDigest: digest };
  }
  const bytes = new Uint8Array(9);
  bytes[0] = out.kind === "handle" ? 1 : 2;
  new DataView(bytes.buffer).setFloat64(1, out.kind === "handle" ? out.handle : out.value, true);
  return { code: result.code, outputDigest: bytes };
}

export function sameSummary(a: ResultSummary, b: ResultSummary): boolean {
  return a.code === b.code && Buffer.from(a.outputDigest).equals(Buffer.from(b.outputDigest));
}
