// Checks, when a call is made, that every value fits its wire field, so a bad value is a typed
// MALFORMED rejection of that call instead of a serialisation failure that ends the stream.
import type { Call, StoreBatch } from "@vgpu-ha/common";

const u32 = (v: number) => Number.isInteger(v) && v >= 0 && v <= 0xffffffff;
const i32 = (v: number) => Number.isInteger(v) && v >= -0x80000000 && v <= 0x7fffffff;
const u64 = (v: number) => Number.isSafeInteger(v) && v >= 0;

/** Why the call cannot be sent, or null. */
export function invalidCall(call: Call): string | null {
  const fields: [string, number, (v: number) => boolean][] = [];
  switch (call.op) {
    case "contextCreate":
      break;
    case "contextDestroy":
    case "fence":
      fields.push(["context", call.context, u32]);
      break;
    case "boAlloc":
      fields.push(["context", call.context, u32], ["sizeBytes", call.sizeBytes, u64]);
      break;
    case "boFree":
    case "boMap":
    case "boUnmap":
      fields.push(["context", call.context, u32], ["bo", call.bo, u32]);
      break;
    case "dmaWrite":
      fields.push(
        ["context", call.context, u32],
        ["bo", call.bo, u32],
        ["offset", call.offset, u64],
      );
      break;
    case "dmaRead":
      fields.push(
        ["context", call.context, u32],
        ["bo", call.bo, u32],
        ["offset", call.offset, u64],
        ["length", call.length, u64],
      );
      break;
    case "boCopy":
      fields.push(
        ["context", call.context, u32],
        ["srcBo", call.srcBo, u32],
        ["srcOffset", call.srcOffset, u64],
        ["dstBo", call.dstBo, u32],
        ["dstOffset", call.dstOffset, u64],
        ["length", call.length, u64],
      );
      break;
    case "kernelLaunch":
      fields.push(["context", call.context, u32]);
      for (const [i, a] of call.args.entries()) {
        const check =
          a.kind === "i32" ? i32 : a.kind === "f32" ? (v: number) => typeof v === "number" : u32;
        fields.push([`args[${i}]`, a.kind === "buffer" ? a.bo : a.value, check]);
      }
      break;
  }
  for (const [name, value, ok] of fields) {
    if (!ok(value)) return `${call.op}: ${name} ${value} does not fit its field`;
  }
  return null;
}

export function invalidStores(batch: StoreBatch): string | null {
  if (!u32(batch.context) || !u32(batch.bo)) return "store batch: context or bo does not fit";
  for (let i = 0; i < batch.offsets.length; i++) {
    if (!u32(batch.offsets[i]!)) return `store ${i}: offset ${batch.offsets[i]} does not fit u32`;
  }
  return null;
}
