// The demo guest of `npm start`: allocates, writes by DMA and by MMIO, launches kernels, reads
// back, checks every result against a plain computation on the host, and says what it did.
import { buf, f32, type Session, u32 } from "../session.js";

export interface DemoStep {
  readonly what: string;
  readonly ok: boolean;
  readonly detail: string;
}

const f32Bytes = (a: Float32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const asF32 = (b: Uint8Array) => new Float32Array(b.slice().buffer);
const asU32 = (b: Uint8Array) => new Uint32Array(b.slice().buffer);

export async function runDemo(
  session: Session,
  report: (step: DemoStep) => void,
): Promise<boolean> {
  let allOk = true;
  const step = (what: string, ok: boolean, detail: string) => {
    allOk &&= ok;
    report({ what, ok, detail });
  };
  const ctx = await session.createContext();
  step("context_create", ctx > 0, `context ${ctx}`);

  // saxpy over 1 Mi floats: y = 2x + y
  const n = 1 << 20;
  const x = new Float32Array(n).map((_, i) => i % 1000);
  const y = new Float32Array(n).fill(1);
  const bx = await session.allocBo(ctx, n * 4);
  const by = await session.allocBo(ctx, n * 4);
  await session.dmaWrite(ctx, bx, 0, f32Bytes(x));
  await session.dmaWrite(ctx, by, 0, f32Bytes(y));
  step("bo_alloc + dma_write", true, `2 buffers of ${n * 4} bytes (handles ${bx}, ${by})`);
  await session.launch(ctx, "saxpy_f32", [buf(by), buf(bx), u32(n), f32(2)]);
  const yOut = asF32(await session.dmaRead(ctx, by, 0, n * 4));
  const saxpyOk = yOut.every((v, i) => v === Math.fround(Math.fround(2 * x[i]!) + 1));
  step("saxpy_f32", saxpyOk, `y[999] = ${yOut[999]} (expected ${2 * 999 + 1})`);

  // reduce-sum of the first 8192 values of y (a fixed tree): every partial sum is an integer
  // below 2^24, so exact in float32 in any order, and the result is the plain sum
  const summed = 8192;
  const bsum = await session.allocBo(ctx, 4);
  await session.launch(ctx, "reduce_sum_f32", [buf(bsum), buf(by), u32(summed)]);
  const sum = asF32(await session.dmaRead(ctx, bsum, 0, 4))[0]!;
  let expected = 0;
  for (let i = 0; i < summed; i++) expected += yOut[i]!;
  step("reduce_sum_f32", sum === expected, `sum = ${sum}`);

  // GEMM 64x64: A times identity is A
  const m = 64;
  const a = new Float32Array(m * m).map((_, i) => (i % 17) - 8);
  const eye = new Float32Array(m * m).map((_, i) => (Math.floor(i / m) === i % m ? 1 : 0));
  const [ba, bb, bc] = await Promise.all([0, 1, 2].map(() => session.allocBo(ctx, m * m * 4)));
  await session.dmaWrite(ctx, ba!, 0, f32Bytes(a));
  await session.dmaWrite(ctx, bb!, 0, f32Bytes(eye));
  await session.launch(ctx, "gemm_f32", [buf(bc!), buf(ba!), buf(bb!), u32(m), u32(m), u32(m)]);
  const c = asF32(await session.dmaRead(ctx, bc!, 0, m * m * 4));
  step(
    "gemm_f32",
    c.every((v, i) => v === a[i]),
    `${m}x${m} · I = A`,
  );

  // MMIO: map a buffer, write it like memory, then increment it with a kernel
  const counters = 1024;
  const bm = await session.allocBo(ctx, counters * 4);
  const mapped = await session.map(ctx, bm, counters * 4);
  for (let i = 0; i < counters; i++) mapped.writeU32(i * 4, i);
  await mapped.flush();
  await session.launch(ctx, "increment_u32", [buf(bm), u32(counters), u32(1)]);
  const inc = asU32(await session.dmaRead(ctx, bm, 0, counters * 4));
  step(
    "mmio stores + increment_u32",
    inc.every((v, i) => v === i + 1),
    `${counters} 4-byte stores, then +1: counter[1023] = ${inc[1023]}`,
  );

  // histogram of the counters into 16 bins
  const bh = await session.allocBo(ctx, 16 * 4);
  await session.launch(ctx, "histogram_u32", [buf(bh), buf(bm), u32(counters), u32(16)]);
  const hist = asU32(await session.dmaRead(ctx, bh, 0, 64));
  step(
    "histogram_u32",
    hist.every((v) => v === counters / 16),
    `16 bins of ${hist[0]}`,
  );

  // 2-D stencil: a hot spot diffuses
  const w = 32;
  const grid = new Float32Array(w * w);
  grid[(w / 2) * w + w / 2] = 100;
  const [bs, bd] = await Promise.all([0, 1].map(() => session.allocBo(ctx, w * w * 4)));
  await session.dmaWrite(ctx, bs!, 0, f32Bytes(grid));
  await session.launch(ctx, "stencil2d_f32", [
    buf(bd!),
    buf(bs!),
    u32(w),
    u32(w),
    u32(10),
    f32(0.1),
  ]);
  const out = asF32(await session.dmaRead(ctx, bd!, 0, w * w * 4));
  const centre = out[(w / 2) * w + w / 2]!;
  step("stencil2d_f32", centre > 0 && centre < 100, `centre after 10 steps = ${centre.toFixed(3)}`);

  // copy between buffers, then fence
  await session.copy(ctx, { bo: bc!, offset: 0 }, { bo: ba!, offset: 0 }, 4096);
  const fence = await session.fence(ctx);
  step("bo_copy + fence", fence === 1, `fence value ${fence}`);

  const bad = await session.call({ op: "boAlloc", context: ctx, sizeBytes: 0 });
  step("bad input refused", bad.code !== 0, `bo_alloc of 0 bytes → error code ${bad.code}`);
  return allOk;
}
