// gemm_f32's whole 4×8 tiles, run by the WebAssembly module of gemm-f32-wat.ts (its bytes in
// gemm-f32-wasm.ts): A's tiled rows, B and C's tiled rows are copied into the module's memory,
// the tiles run there with f32x4 arithmetic (four sums of C per vector, each still rounded to
// float32 at every product and sum, in p order), and C's rows are copied back. The copies cost
// O(m·k + k·n + m·n) against the tiles' O(m·n·k).
//
// Memory: launches that fit in RETAINED_MEMORY_BYTES share one instance whose memory stays
// allocated between launches; a larger launch gets an instance of its own, dropped after it.
import { F32_MIN_NORMAL } from "./f32.js";
import { GEMM_F32_WASM_BASE64 } from "./gemm-f32-wasm.js";
import { WASM_TILE_COLUMNS, WASM_TILE_ROWS } from "./gemm-f32-wat.js";

export const TILE_ROWS = WASM_TILE_ROWS;
export const TILE_COLUMNS = WASM_TILE_COLUMNS;
/** Values of p per panel of B: 256 × 8 columns = 8 KiB, read by the tiles of every row. */
const PANEL_DEPTH = 256;
const PAGE_BYTES = 65536;
/** Memory kept by the shared instance between launches. */
const RETAINED_MEMORY_BYTES = 64 * 2 ** 20;
/** The most memory a launch may use (byte offsets are 32-bit); beyond, the caller's rows. */
const MAX_MEMORY_BYTES = 2 ** 31;

// The little of the WebAssembly API used here (the project's lib has no WebAssembly types).
declare const WebAssembly: {
  Module: new (bytes: Uint8Array) => WasmModule;
  Instance: new (module: WasmModule) => { readonly exports: unknown };
};
interface WasmModule {
  readonly __wasmModule?: never;
}
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}

/** tiles(c, a, b, n, k, mt, nt, depth): see gemm-f32-wat.ts. */
type TilesFunction = (
  c: number,
  a: number,
  b: number,
  n: number,
  k: number,
  mt: number,
  nt: number,
  depth: number,
) => void;

interface TilesExports {
  readonly memory: WasmMemory;
  readonly tiles: TilesFunction;
  readonly tiles_ftz: TilesFunction;
}

let compiled: WasmModule | undefined;
let shared: TilesExports | undefined;

function instantiate(): TilesExports {
  compiled ??= new WebAssembly.Module(Buffer.from(GEMM_F32_WASM_BASE64, "base64"));
  return new WebAssembly.Instance(compiled).exports as unknown as TilesExports;
}

/** An instance whose memory holds at least `bytes`, or undefined when it cannot be had. */
function instanceFor(bytes: number): TilesExports | undefined {
  if (bytes > MAX_MEMORY_BYTES) return undefined;
  let instance: TilesExports;
  if (bytes > RETAINED_MEMORY_BYTES) instance = instantiate();
  else {
    shared ??= instantiate();
    instance = shared;
  }
  const missing = bytes - instance.memory.buffer.byteLength;
  if (missing > 0) {
    try {
      instance.memory.grow(Math.ceil(missing / PAGE_BYTES));
    } catch {
      return undefined; // no memory for it now: the caller computes the rows itself
    }
  }
  return instance;
}

/** to[offset..offset+count) = from[0..count), each subnormal flushed to a zero of its sign. */
function copyFlushed(to: Float32Array, offset: number, from: Float32Array, count: number) {
  for (let i = 0; i < count; i++) {
    const x = from[i]!;
    to[offset + i] = Math.abs(x) < F32_MIN_NORMAL ? x * 0 : x;
  }
}

/**
 * Computes C[0..mt)[0..nt) (mt, nt whole multiples of the tile, k ≥ 1) into cf, and zeros in
 * the rest of those rows; `ftz` flushes operands, products and sums (contract v2), else the
 * caller has proven flushing changes nothing. False, with cf untouched, when the memory
 * cannot be had.
 */
export function wasmTiles(
  cf: Float32Array,
  af: Float32Array,
  bf: Float32Array,
  n: number,
  k: number,
  mt: number,
  nt: number,
  ftz: boolean,
): boolean {
  const cCount = mt * n;
  const aCount = mt * k;
  const bCount = k * n;
  const instance = instanceFor((cCount + aCount + bCount) * 4);
  if (instance === undefined) return false;
  const memory = new Float32Array(instance.memory.buffer);
  const aOffset = cCount;
  const bOffset = cCount + aCount;
  memory.fill(0, 0, cCount);
  if (ftz) {
    copyFlushed(memory, aOffset, af, aCount);
    copyFlushed(memory, bOffset, bf, bCount);
  } else {
    memory.set(af.subarray(0, aCount), aOffset);
    memory.set(bf.subarray(0, bCount), bOffset);
  }
  const run = ftz ? instance.tiles_ftz : instance.tiles;
  run(0, aOffset * 4, bOffset * 4, n, k, mt, nt, PANEL_DEPTH);
  cf.set(memory.subarray(0, cCount));
  return true;
}
