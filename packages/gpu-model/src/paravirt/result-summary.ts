// The summary of a call's result that the standby compares with its own: the code and a
// 16-byte digest of the canonical output.
import { createHash } from "node:crypto";
import type { CallResult, ResultSummary } from "@vgpu-ha/common/core";

const NONE = new Uint8Array(0);

/** Bytes of a handle's or value's summary: a kind byte and the value as a float64 (LE). */
const VALUE_SUMMARY_BYTES = 9;
/** Value summaries cut from one slab: a new ArrayBuffer and DataView per call cost ~1 µs. */
const SLAB_SUMMARIES = 4096;

/** Summaries of handles and values, cut from a slab as Node cuts small Buffers from its pool. */
class ValueSummaries {
  private slab = new Uint8Array(0);
  private view = new DataView(this.slab.buffer);
  private at = 0;

  take(kind: 1 | 2, value: number): Uint8Array {
    if (this.at + VALUE_SUMMARY_BYTES > this.slab.byteLength) {
      this.slab = new Uint8Array(SLAB_SUMMARIES * VALUE_SUMMARY_BYTES);
      this.view = new DataView(this.slab.buffer);
      this.at = 0;
    }
    const at = this.at;
    this.at = at + VALUE_SUMMARY_BYTES;
    this.view.setUint8(at, kind);
    this.view.setFloat64(at + 1, value, true);
    return this.slab.subarray(at, at + VALUE_SUMMARY_BYTES);
  }
}

const values = new ValueSummaries();

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
  const digest = out.kind === "handle" ? values.take(1, out.handle) : values.take(2, out.value);
  return { code: result.code, outputDigest: digest };
}

export function sameSummary(a: ResultSummary, b: ResultSummary): boolean {
  return a.code === b.code && sameBytes(a.outputDigest, b.outputDigest);
}

/** Byte-wise equality without copying either side (Buffer.from(view) copies). */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}
