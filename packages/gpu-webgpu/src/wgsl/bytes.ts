// The byte-level shaders behind DMA, MMIO and snapshots. WebGPU copies and writes whole 4-byte
// words at 4-byte offsets; these cover what that cannot:
//   PATCH: records of four words (word index, mask, value, xor): word = ((old & ~mask) |
//     (value & mask)) ^ xor. Edges of unaligned writes, MMIO store batches (merged so each
//     word appears once), the xor drill.
//   BYTE_COPY: copies `length` bytes from byte a1 of src to byte a0 of dst, any alignment
//     (src is never dst: the executor stages overlapping copies).
//   PAGE_SCAN: one workgroup per 4 KiB page, flag = 1 when any byte of it is not zero.
import { PAGE_SIZE_BYTES } from "@vgpu-ha/gpu-model";

export const PATCH_RECORD_WORDS = 4;

export const PATCH_WGSL = /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read> recs: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let g = flatGroup(wid);
  if (g >= p.groups) { return; }
  let r = g * 256u + li;
  if (r >= p.a0) { return; }
  let at = p.a1 + r * 4u;
  let word = recs[at];
  let mask = recs[at + 1u];
  dst[word] = ((dst[word] & ~mask) | (recs[at + 2u] & mask)) ^ recs[at + 3u];
}`;

/** a0 = dst byte, a1 = src byte, a2 = length, a3 = first dst word, a4 = dst words. */
export const BYTE_COPY_WGSL = /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read> src: array<u32>;

fn srcByte(at: u32) -> u32 { return (src[at >> 2u] >> ((at & 3u) * 8u)) & 0xffu; }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let g = flatGroup(wid);
  if (g >= p.groups) { return; }
  let k = g * 256u + li;
  if (k >= p.a4) { return; }
  let word = p.a3 + k;
  var v = dst[word];
  for (var b = 0u; b < 4u; b++) {
    let at = word * 4u + b;
    if (at >= p.a0 && at - p.a0 < p.a2) {
      let shift = b * 8u;
      v = (v & ~(0xffu << shift)) | (srcByte(p.a1 + (at - p.a0)) << shift);
    }
  }
  dst[word] = v;
}`;

const PAGE_WORDS = PAGE_SIZE_BYTES / 4;

/** a0 = pages, a1 = first flag; flags[a1 + page] = 1 when the page holds a non-zero byte. */
export const PAGE_SCAN_WGSL = /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> flags: array<u32>;
@group(0) @binding(2) var<storage, read> buf: array<u32>;
var<workgroup> seen: atomic<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let page = flatGroup(wid);
  if (page >= p.groups) { return; }
  if (li == 0u) { atomicStore(&seen, 0u); }
  workgroupBarrier();
  var bits = 0u;
  for (var r = 0u; r < ${PAGE_WORDS / 256}u; r++) { bits = bits | buf[page * ${PAGE_WORDS}u + li + 256u * r]; }
  if (bits != 0u) { atomicOr(&seen, 1u); }
  workgroupBarrier();
  if (li == 0u) { flags[p.a1 + page] = atomicLoad(&seen); }
}`;
