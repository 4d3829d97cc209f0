// Device operations on bytes, encoded into a batch: DMA write and read, copies, MMIO store
// batches, page batches, the xor drill and the state hash. WebGPU moves whole words at word
// offsets; unaligned edges go through patch records (plan/bytes.ts), unaligned or overlapping
// copies through a staged byte copy.
import { createHash } from "node:crypto";
import type { OpResult } from "@vgpu-ha/gpu-model";
import type { Batch } from "./batch.js";
import type { GpuBufferEntry } from "./buffers.js";
import { alignDown4, alignUp4, type PatchRecord, planWrite, WordPatches } from "./plan/bytes.js";
import { groupsOf256 } from "./plan/grid.js";
import { PATCH_RECORD_WORDS } from "./wgsl/index.js";

/** Applies patch records to `dst` (each word at most once per call). */
export function patch(batch: Batch, dst: GPUBuffer, records: readonly PatchRecord[]): void {
  if (records.length === 0) return;
  const slice = batch.upload(records.length * PATCH_RECORD_WORDS * 4, 16);
  const words = new Uint32Array(slice.bytes.buffer, slice.bytes.byteOffset, records.length * 4);
  records.forEach((r, i) => {
    words[i * 4] = r.word;
    words[i * 4 + 1] = r.mask;
    words[i * 4 + 2] = r.value;
    words[i * 4 + 3] = r.xor;
  });
  batch.dispatch(
    "patch",
    [records.length, slice.offset / 4],
    [dst, batch.uploadBuffer(slice)],
    groupsOf256(records.length),
  );
}

export function write(batch: Batch, dst: GpuBufferEntry, offset: number, data: Uint8Array): void {
  if (data.byteLength === 0) return;
  const plan = planWrite(offset, data.byteLength);
  if (plan.end > plan.start) {
    // Place the data so that its aligned middle sits at a 4-byte offset of the arena.
    const lead = offset % 4;
    const slice = batch.upload(lead + data.byteLength, 4);
    slice.bytes.set(data, lead);
    batch.copy(
      slice.buffer,
      slice.offset + lead + (plan.start - offset),
      dst.gpu,
      plan.start,
      plan.end - plan.start,
    );
  }
  if (plan.edges.length === 0) return;
  const patches = new WordPatches();
  for (const [from, to] of plan.edges) patches.setBytes(from, data, from - offset, to - from);
  patch(batch, dst.gpu, patches.records());
}

export function read(
  batch: Batch,
  src: GpuBufferEntry,
  offset: number,
  length: number,
): () => OpResult {
  if (length === 0) return () => new Uint8Array(0);
  const start = alignDown4(offset);
  const end = alignUp4(offset + length);
  const rb = batch.readback(src.gpu, start, end - start);
  return () => rb.data().slice(offset - start, offset - start + length);
}

export function copy(
  batch: Batch,
  src: GpuBufferEntry,
  srcOffset: number,
  dst: GpuBufferEntry,
  dstOffset: number,
  length: number,
): void {
  if (length === 0) return;
  const aligned = srcOffset % 4 === 0 && dstOffset % 4 === 0 && length % 4 === 0;
  if (aligned && src !== dst) {
    batch.copy(src.gpu, srcOffset, dst.gpu, dstOffset, length);
    return;
  }
  // Stage the source's words first when the ranges share a buffer (a move, as copyWithin).
  let from = src.gpu;
  let fromByte = srcOffset;
  if (src === dst) {
    const start = alignDown4(srcOffset);
    const size = alignUp4(srcOffset + length) - start;
    from = batch.temporary(size);
    batch.copy(src.gpu, start, from, 0, size);
    fromByte = srcOffset - start;
    if (aligned) {
      batch.copy(from, 0, dst.gpu, dstOffset, length);
      return;
    }
  }
  const firstWord = Math.floor(dstOffset / 4);
  const words = Math.ceil((dstOffset + length) / 4) - firstWord;
  batch.dispatch(
    "byte_copy",
    [dstOffset, fromByte, length, firstWord, words],
    [dst.gpu, from],
    groupsOf256(words),
  );
}

/** An MMIO store batch or the xor drill: records already merged per word. */
export function patchBuffer(batch: Batch, dst: GpuBufferEntry, records: readonly PatchRecord[]) {
  patch(batch, dst.gpu, records);
}

/** SHA-256 of each buffer's bytes, as the model hashes them. */
export function hash(batch: Batch, entries: readonly GpuBufferEntry[]): () => OpResult {
  const rbs = entries.map((e) => ({
    e,
    rb: e.size > 0 ? batch.readback(e.gpu, 0, alignUp4(e.size)) : undefined,
  }));
  return () =>
    rbs.map(({ e, rb }) =>
      createHash("sha256")
        .update(rb ? rb.data().subarray(0, e.size) : new Uint8Array(0))
        .digest("hex"),
    );
}
