// The summary of a call's result that the standby compares with its own: the code and a
// 16-byte digest of the canonical output.
import { createHash } from "node:crypto";
import type { CallResult, ResultSummary } from "@vgpu-ha/common";

const NONE = new Uint8Array(0);

export function summarizeResult(result: CallResult): ResultSummary {
  const out = result.output;
  if (out.kind === "none") return { code: result.code, outputDigest: NONE };
  const hash = createHash("sha256").update(out.kind);
  if (out.kind === "data") hash.update(out.data);
  else hash.update(String(out.kind === "handle" ? out.handle : out.value));
  return { code: result.code, outputDigest: hash.digest().subarray(0, 16) };
}

export function sameSummary(a: ResultSummary, b: ResultSummary): boolean {
  return a.code === b.code && Buffer.from(a.outputDigest).equals(Buffer.from(b.outputDigest));
}
