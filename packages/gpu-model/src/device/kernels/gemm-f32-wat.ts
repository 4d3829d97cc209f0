// The WebAssembly text of gemm_f32's tiles (gemm-f32.ts runs them): the source of the bytes in
// gemm-f32-wasm.ts, which `npm run generate:wasm` assembles from it with wabt
// (gemm-f32-wasm.test.ts checks they are current). At run time only its tile size is used.
//
// tiles(c, a, b, n, k, mt, nt, depth) adds A[i..i+4)[p0..p1) · B[p0..p1)[j..j+8) into
// C[i..i+4)[j..j+8) for every whole 4×8 tile of the first mt rows and nt columns of C (row
// length n), p0 in steps of depth: B's 8-column panel stays in the cache while the tiles of
// all rows read it. c, a and b are byte offsets of row-major float32 matrices in the module's
// memory. Each of the eight accumulators is a vector of four sums of C, one f32x4.mul and one
// f32x4.add per step of p: every sum sees its products in p ascending order, each product and
// each sum rounded to float32 once (WebAssembly has no fused multiply-add), which is exactly
// the naive loop's arithmetic. tiles_ftz does the same and flushes every product and sum that
// is subnormal to a zero of its sign (contract v2; operands are flushed before they are copied
// in). NaN payloads are not deterministic in WebAssembly: the kernel canonicalises C after.

const ROWS = 4;
const VECTORS = 2;

/** `v` with subnormal lanes made zeros of their sign: keep only the sign where |v| < 2^-126. */
function flush(v: string): string {
  const tiny = `(f32x4.lt (f32x4.abs ${v}) (global.get $minNormal))`;
  return `(v128.bitselect (v128.and ${v} (global.get $sign)) ${v} ${tiny})`;
}

function tilesFunction(name: string, ftz: boolean): string {
  const acc = (r: number, v: number) => `$c${r}${v}`;
  const rowOffset = (base: string, stride: string, r: number) =>
    r === 0
      ? `(local.get ${base})`
      : `(i32.add (local.get ${base}) (i32.mul (local.get ${stride}) (i32.const ${r})))`;
  const product = (r: number, v: number) => {
    const p = `(f32x4.mul (local.get $x) (local.get $b${v}))`;
    const sum = `(f32x4.add (local.get ${acc(r, v)}) ${ftz ? flush(p) : p})`;
    return `(local.set ${acc(r, v)} ${ftz ? flush(sum) : sum})`;
  };
  const locals: string[] = [];
  const loads: string[] = [];
  const stores: string[] = [];
  const steps: string[] = [];
  for (let r = 0; r < ROWS; r++) {
    steps.push(`(local.set $x (f32x4.splat (f32.load ${rowOffset("$ap", "$kb", r)})))`);
    for (let v = 0; v < VECTORS; v++) {
      locals.push(`(local ${acc(r, v)} v128)`);
      loads.push(
        `(local.set ${acc(r, v)} (v128.load offset=${16 * v} ${rowOffset("$cp", "$nb", r)}))`,
      );
      stores.push(
        `(v128.store offset=${16 * v} ${rowOffset("$cp", "$nb", r)} (local.get ${acc(r, v)}))`,
      );
      steps.push(product(r, v));
    }
  }
  const bLoads = Array.from(
    { length: VECTORS },
    (_, v) => `(local.set $b${v} (v128.load offset=${16 * v} (local.get $bp)))`,
  );
  const bLocals = Array.from({ length: VECTORS }, (_, v) => `(local $b${v} v128)`);
  return `
  (func (export "${name}")
    (param $c i32) (param $a i32) (param $b i32) (param $n i32) (param $k i32)
    (param $mt i32) (param $nt i32) (param $depth i32)
    (local $nb i32) (local $kb i32) (local $j i32) (local $p0 i32) (local $p1 i32)
    (local $i i32) (local $p i32) (local $cp i32) (local $ap i32) (local $bp i32)
    ${locals.join(" ")} ${bLocals.join(" ")} (local $x v128)
    (local.set $nb (i32.shl (local.get $n) (i32.const 2)))
    (local.set $kb (i32.shl (local.get $k) (i32.const 2)))
    (local.set $j (i32.const 0))
    (block $jDone (loop $jLoop
      (br_if $jDone (i32.ge_u (local.get $j) (local.get $nt)))
      (local.set $p0 (i32.const 0))
      (block $pDone (loop $pLoop
        (br_if $pDone (i32.ge_u (local.get $p0) (local.get $k)))
        (local.set $p1 (i32.add (local.get $p0) (local.get $depth)))
        (if (i32.gt_u (local.get $p1) (local.get $k)) (then (local.set $p1 (local.get $k))))
        (local.set $i (i32.const 0))
        (block $iDone (loop $iLoop
          (br_if $iDone (i32.ge_u (local.get $i) (local.get $mt)))
          (local.set $cp (i32.add (local.get $c)
            (i32.shl (i32.add (i32.mul (local.get $i) (local.get $n)) (local.get $j)) (i32.const 2))))
          (local.set $ap (i32.add (local.get $a)
            (i32.shl (i32.add (i32.mul (local.get $i) (local.get $k)) (local.get $p0)) (i32.const 2))))
          (local.set $bp (i32.add (local.get $b)
            (i32.shl (i32.add (i32.mul (local.get $p0) (local.get $n)) (local.get $j)) (i32.const 2))))
          ${loads.join("\n          ")}
          (local.set $p (local.get $p0))
          (block $qDone (loop $qLoop
            (br_if $qDone (i32.ge_u (local.get $p) (local.get $p1)))
            ${bLoads.join("\n            ")}
            ${steps.join("\n            ")}
            (local.set $ap (i32.add (local.get $ap) (i32.const 4)))
            (local.set $bp (i32.add (local.get $bp) (local.get $nb)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $qLoop)))
          ${stores.join("\n          ")}
          (local.set $i (i32.add (local.get $i) (i32.const ${ROWS})))
          (br $iLoop)))
        (local.set $p0 (i32.add (local.get $p0) (local.get $depth)))
        (br $pLoop)))
      (local.set $j (i32.add (local.get $j) (i32.const ${4 * VECTORS})))
      (br $jLoop)))
  )`;
}

/** The module: one growable memory, the two tile functions. */
export function gemmWat(): string {
  return `(module
  (memory (export "memory") 1)
  (global $minNormal v128 (v128.const i32x4 0x00800000 0x00800000 0x00800000 0x00800000))
  (global $sign v128 (v128.const i32x4 0x80000000 0x80000000 0x80000000 0x80000000))
  ${tilesFunction("tiles", false)}
  ${tilesFunction("tiles_ftz", true)}
)
`;
}

/** Rows and columns of C per tile of the module. */
export const WASM_TILE_ROWS = ROWS;
export const WASM_TILE_COLUMNS = 4 * VECTORS;
