// Pure planning of byte-level updates onto 4-byte words (WebGPU copies and writes whole words at
// word offsets): the aligned middle of a byte range, and patch records for the words it only
// partly covers or that an MMIO store batch touches. A record is (word, mask, value, xor):
// word = ((old & ~mask) | (value & mask)) ^ xor (wgsl/bytes.ts).

export interface PatchRecord {
  readonly word: number;
  readonly mask: number;
  readonly value: number;
  readonly xor: number;
}

/** A write of `length` bytes at `offset`: the word-aligned part and the bytes around it. */
export interface WritePlan {
  /** Aligned byte range [start, end) to copy as words; start === end when none. */
  readonly start: number;
  readonly end: number;
  /** Byte ranges [from, to) written through patch records (at most two, each within a word). */
  readonly edges: readonly (readonly [number, number])[];
}

export function alignDown4(x: number): number {
  return x - (x % 4);
}

export function alignUp4(x: number): number {
  return x + ((4 - (x % 4)) % 4);
}

export function planWrite(offset: number, length: number): WritePlan {
  const end = offset + length;
  const start = alignUp4(offset);
  const middleEnd = alignDown4(end);
  if (middleEnd <= start) {
    // No whole word: at most two partial words, patched.
    return { start: 0, end: 0, edges: length === 0 ? [] : splitAtWord(offset, end) };
  }
  const edges: [number, number][] = [];
  if (offset < start) edges.push([offset, start]);
  if (middleEnd < end) edges.push([middleEnd, end]);
  return { start, end: middleEnd, edges };
}

/** [from, to) cut at the word boundary inside it, if any. */
function splitAtWord(from: number, to: number): [number, number][] {
  const boundary = alignUp4(from + 1);
  return boundary < to && boundary > from
    ? [
        [from, boundary],
        [boundary, to],
      ]
    : [[from, to]];
}

/**
 * Word records that set bytes [at, at+bytes.length) of a buffer to `bytes`, one record per word,
 * later bytes overriding earlier ones (callers give byte runs in order).
 */
export class WordPatches {
  private readonly words = new Map<number, { mask: number; value: number }>();

  setBytes(at: number, bytes: Uint8Array, from = 0, length = bytes.length - from): void {
    for (let k = 0; k < length; k++) {
      const address = at + k;
      const word = Math.floor(address / 4);
      const shift = (address % 4) * 8;
      const entry = this.words.get(word) ?? { mask: 0, value: 0 };
      entry.mask = (entry.mask | (0xff << shift)) >>> 0;
      entry.value = ((entry.value & ~(0xff << shift)) | (bytes[from + k]! << shift)) >>> 0;
      this.words.set(word, entry);
    }
  }

  get size(): number {
    return this.words.size;
  }

  records(): PatchRecord[] {
    return [...this.words].map(([word, e]) => ({ word, mask: e.mask, value: e.value, xor: 0 }));
  }
}

/** The records of an MMIO store batch (widths 1, 2, 4 or 8, bytes in `data` in store order). */
export function storeRecords(
  offsets: ArrayLike<number>,
  widths: Uint8Array,
  data: Uint8Array,
): PatchRecord[] {
  const patches = new WordPatches();
  let at = 0;
  for (let i = 0; i < offsets.length; i++) {
    const width = widths[i]!;
    patches.setBytes(offsets[i]!, data, at, width);
    at += width;
  }
  return patches.records();
}

/** The record that flips the bits of `mask` in byte `offset`. */
export function xorRecord(offset: number, mask: number): PatchRecord {
  return {
    word: Math.floor(offset / 4),
    mask: 0,
    value: 0,
    xor: ((mask & 0xff) << ((offset % 4) * 8)) >>> 0,
  };
}

/** Applies records to a word array as the PATCH shader does (tests, and the CPU's reference). */
export function applyRecords(words: Uint32Array, records: readonly PatchRecord[]): void {
  for (const r of records) {
    words[r.word] = (((words[r.word]! & ~r.mask) | (r.value & r.mask)) ^ r.xor) >>> 0;
  }
}
