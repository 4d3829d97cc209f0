// The contract between the kernel library and the device: a kernel declares typed argument
// slots, validates resolved arguments without side effects, reports its work, and runs.

export type SlotKind = "buffer" | "u32" | "i32" | "f32";

export interface Slot {
  readonly name: string;
  readonly kind: SlotKind;
}

/** A buffer as a kernel sees it: views over the BO's VRAM. `id` identifies the BO (aliasing). */
export interface KernelBuffer {
  readonly id: number;
  readonly byteLength: number;
  readonly bytes: Uint8Array;
  readonly u32: Uint32Array;
  readonly i32: Int32Array;
  readonly f32: Float32Array;
}

/** Resolved arguments, one per slot: a KernelBuffer for buffer slots, a number otherwise. */
export type ResolvedArg = KernelBuffer | number;

/** Why validation failed: the arguments do not fit the kernel. */
export interface KernelRejection {
  readonly reason: "args";
  readonly message: string;
}

export interface KernelSpec {
  readonly name: string;
  readonly slots: readonly Slot[];
  /**
   * Checks everything beyond slot kinds (the device checks those): element counts fit in the
   * buffers, no forbidden aliasing, scalars in range. Must not mutate anything. Returns null
   * when the launch may run.
   */
  validate(args: readonly ResolvedArg[]): KernelRejection | null;
  /** Work units of this launch (about one per element operation), for per-launch limits. */
  work(args: readonly ResolvedArg[]): number;
  /** Runs the kernel. Only called after validate() returned null. Bit-for-bit deterministic. */
  run(args: readonly ResolvedArg[]): void;
}
