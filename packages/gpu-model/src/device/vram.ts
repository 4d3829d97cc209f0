// VRAM: a byte budget of a configured size, handed out in whole 4 KiB pages. Each buffer is
// backed by its own zero-filled ArrayBuffer, so untouched pages cost no host memory.

export const PAGE_SIZE_BYTES = 4096;
export const PAGE_SHIFT = 12;

export function roundUpToPage(sizeBytes: number): number {
  return Math.ceil(sizeBytes / PAGE_SIZE_BYTES) * PAGE_SIZE_BYTES;
}

export class Vram {
  readonly totalBytes: number;
  private usedBytesValue = 0;

  constructor(totalBytes: number) {
    this.totalBytes = totalBytes;
  }

  get usedBytes(): number {
    return this.usedBytesValue;
  }

  /** Reserves whole pages for `sizeBytes`; null when VRAM is full. */
  reserve(sizeBytes: number): number | null {
    const pages = roundUpToPage(sizeBytes);
    if (this.usedBytesValue + pages > this.totalBytes) return null;
    this.usedBytesValue += pages;
    return pages;
  }

  release(reservedBytes: number): void {
    this.usedBytesValue -= reservedBytes;
  }
}
