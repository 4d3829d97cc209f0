// Seeded random sequences of valid device operations of every kind, for the GPU tests: buffers
// of whole pages, DMA writes and reads at any byte offset, copies (overlapping ones within a
// buffer too), MMIO store batches of widths 1/2/4/8, page batches, the xor drill, launches of
// every kernel with arguments the kernel's own validate() accepts, hashes, and snapshots with a
// "preserve" before every write to a covered buffer (as the paravirtual layer queues them).
import { type DeviceOp, KERNELS, type KernelSpec, PAGE_SIZE_BYTES } from "@vgpu-ha/gpu-model";
import { mixedF32, seeded } from "./kernel-cases.js";

interface Live {
  readonly id: number;
  readonly size: number;
}

const KERNEL_NAMES = [...KERNELS.keys()];

export class RandomOps {
  private readonly next: () => number;
  private readonly live: Live[] = [];
  private nextId = 1;
  private snap: { id: number; covered: Set<number>; chunks: number } | undefined;
  private snaps = 0;
  readonly ops: DeviceOp[] = [];

  constructor(seed: number) {
    this.next = seeded(seed);
  }

  private int(n: number): number {
    return this.next() % n;
  }

  private pick<T>(list: readonly T[]): T {
    return list[this.int(list.length)]!;
  }

  private bytes(n: number): Uint8Array {
    if (this.int(2) === 0) return Uint8Array.from({ length: n }, () => this.next() & 0xff);
    // Float data (subnormals and tiny values too), cut to n bytes.
    const words = mixedF32(
      Math.ceil(n / 4),
      this.next(),
      this.int(4) === 0 ? "specials" : "finite",
    );
    return new Uint8Array(words.buffer, 0, n).slice();
  }

  /** Queues `op`, with a preserve first when it writes [start, end) of a covered buffer. */
  private write(op: DeviceOp, id: number, start: number, end: number): void {
    if (this.snap?.covered.has(id)) {
      this.ops.push({ k: "preserve", snap: this.snap.id, id, start, end });
    }
    this.ops.push(op);
  }

  /** Generates `count` operations (plus the preserves they need). */
  generate(count: number): DeviceOp[] {
    for (let i = 0; i < count; i++) this.step();
    if (this.snap) this.ops.push({ k: "snapEnd", snap: this.snap.id });
    this.ops.push({ k: "hash", ids: this.live.map((b) => b.id) });
    return this.ops;
  }

  private step(): void {
    if (this.live.length < 2 || (this.live.length < 6 && this.int(10) === 0)) {
      this.alloc();
      return;
    }
    const r = this.int(100);
    const kinds: [number, () => void][] = [
      [4, () => (this.live.length > 2 ? this.free() : this.launch())],
      [20, () => this.dmaWrite()],
      [28, () => this.read()],
      [38, () => this.copy()],
      [48, () => this.stores()],
      [54, () => this.pages()],
      [57, () => this.xor()],
      [62, () => this.hash()],
      [70, () => this.snapshot()],
      [100, () => this.launch()],
    ];
    kinds.find(([below]) => r < below)![1]();
  }

  private alloc(): void {
    const b = { id: this.nextId++, size: (1 + this.int(4)) * PAGE_SIZE_BYTES };
    this.live.push(b);
    this.ops.push({ k: "alloc", id: b.id, size: b.size });
    const data = this.bytes(b.size);
    this.write({ k: "write", id: b.id, offset: 0, data }, b.id, 0, b.size);
  }

  private free(): void {
    const b = this.live.splice(this.int(this.live.length), 1)[0]!;
    this.ops.push({ k: "free", id: b.id });
  }

  private range(b: Live, maxLength: number): [number, number] {
    const length = this.int(Math.min(maxLength, b.size) + 1);
    return [this.int(b.size - length + 1), length];
  }

  private dmaWrite(): void {
    const b = this.pick(this.live);
    const [offset, length] = this.range(b, this.int(3) === 0 ? b.size : 300);
    this.write(
      { k: "write", id: b.id, offset, data: this.bytes(length) },
      b.id,
      offset,
      offset + length,
    );
  }

  private read(): void {
    const b = this.pick(this.live);
    const [offset, length] = this.range(b, b.size);
    this.ops.push({ k: "read", id: b.id, offset, length });
  }

  private copy(): void {
    const src = this.pick(this.live);
    const dst = this.int(3) === 0 ? src : this.pick(this.live);
    const [srcOffset, length] = this.range(src, Math.min(src.size, dst.size));
    const dstOffset = this.int(dst.size - length + 1);
    const op = { k: "copy", src: src.id, srcOffset, dst: dst.id, dstOffset, length } as const;
    this.write(op, dst.id, dstOffset, dstOffset + length);
  }

  private stores(): void {
    const b = this.pick(this.live);
    const count = 1 + this.int(16);
    const offsets: number[] = [];
    const widths = new Uint8Array(count);
    for (let i = 0; i < count; i++) {
      widths[i] = this.pick([1, 2, 4, 8]);
      // Often in one small area, so stores share words.
      const span = this.int(2) === 0 ? 24 : b.size;
      const base = this.int(2) === 0 ? 100 : 0;
      offsets.push(Math.min(base + this.int(span), b.size - widths[i]!));
    }
    const data = this.bytes(widths.reduce((a, w) => a + w, 0));
    if (this.snap?.covered.has(b.id)) {
      for (let i = 0; i < count; i++) {
        const start = offsets[i]!;
        this.ops.push({
          k: "preserve",
          snap: this.snap.id,
          id: b.id,
          start,
          end: start + widths[i]!,
        });
      }
    }
    this.ops.push({ k: "stores", id: b.id, offsets, widths, data });
  }

  private pages(): void {
    const writes = [];
    for (let i = 0, n = 1 + this.int(3); i < n; i++) {
      const b = this.pick(this.live);
      const page = this.int(b.size / PAGE_SIZE_BYTES);
      const whole = this.int(2) === 0;
      const at = page * PAGE_SIZE_BYTES + (whole ? 0 : this.int(PAGE_SIZE_BYTES - 8));
      const length = whole ? PAGE_SIZE_BYTES : 1 + this.int(Math.min(200, b.size - at));
      if (this.snap?.covered.has(b.id)) {
        this.ops.push({ k: "preserve", snap: this.snap.id, id: b.id, start: at, end: at + length });
      }
      writes.push({ id: b.id, at, data: this.bytes(length) });
    }
    this.ops.push({ k: "pages", writes });
  }

  private xor(): void {
    const b = this.pick(this.live);
    const offset = this.int(b.size);
    this.write({ k: "xor", id: b.id, offset, mask: 1 + this.int(255) }, b.id, offset, offset + 1);
  }

  private hash(): void {
    this.ops.push({ k: "hash", ids: this.live.filter(() => this.int(2) === 0).map((b) => b.id) });
  }

  private snapshot(): void {
    if (this.snap === undefined) {
      const id = ++this.snaps;
      this.snap = { id, covered: new Set(this.live.map((b) => b.id)), chunks: 0 };
      const buffers = this.live.map((b) => ({ context: 1, bo: 1000 + b.id, id: b.id }));
      this.ops.push({ k: "snapBegin", snap: id, buffers });
      return;
    }
    if (this.snap.chunks++ > 6 && this.int(3) === 0) {
      this.ops.push({ k: "snapEnd", snap: this.snap.id });
      this.snap = undefined;
      return;
    }
    const maxBytes = 1 + this.int(3 * PAGE_SIZE_BYTES);
    this.ops.push({ k: "snapChunk", snap: this.snap.id, maxBytes });
  }

  private launch(): void {
    for (let attempt = 0; attempt < 20; attempt++) {
      const kernel = KERNELS.get(this.pick(KERNEL_NAMES))!;
      const args = this.args(kernel);
      // validate() reads only ids and sizes.
      const resolved = args.map((a) => {
        if (typeof a === "number") return a;
        return { id: a.buffer, byteLength: this.live.find((b) => b.id === a.buffer)!.size };
      });
      if (kernel.validate(resolved as never) !== null) continue;
      if (this.snap) {
        for (const a of args) {
          if (typeof a !== "number" && this.snap.covered.has(a.buffer)) {
            const size = this.live.find((b) => b.id === a.buffer)!.size;
            this.ops.push({ k: "preserve", snap: this.snap.id, id: a.buffer, start: 0, end: size });
          }
        }
      }
      this.ops.push({ k: "launch", kernel: kernel.name, args });
      return;
    }
  }

  private args(kernel: KernelSpec): ({ buffer: number } | number)[] {
    const smallest = Math.min(...this.live.map((b) => b.size)) / 4;
    return kernel.slots.map((slot) => {
      if (slot.kind === "buffer") return { buffer: this.pick(this.live).id };
      if (slot.kind === "f32") {
        return Math.fround(this.pick([0.5, -1.25, 2 ** -140, 2 ** -63, -0, 3.5, 1e-20]));
      }
      // Sizes: element counts up to the smallest buffer, grid sides up to 64, bins, iterations.
      if (slot.name === "iterations") return this.int(4);
      if (slot.name === "bins") return 1 + this.int(300);
      if (kernel.name === "gemm_f32" || kernel.name === "stencil2d_f32") {
        return this.int(40) + (slot.name === "width" || slot.name === "height" ? 1 : 0);
      }
      return this.int(smallest + 1);
    });
  }
}
