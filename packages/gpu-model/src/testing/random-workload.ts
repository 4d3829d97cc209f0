// Seeded random guest workloads for the paravirtual backend, for property and integration tests.
// A workload is plain data: sessions, and per-session ordered frames of every call kind and of
// MMIO store batches (widths 1/2/4/8), mostly valid, with deliberate faults and re-sends mixed
// in. The generator keeps a model of the backend (guest handles, sizes, mapped flags, tenant
// usage), so valid frames hit real handles, and it records the code (and new handle) the
// backend must answer for every frame: the model doubles as a reference for the backend.
// Generation is sequential, so the first n steps of a seed's workload are a prefix of any
// longer one: shrinking the frame count shrinks to a prefix.
import {
  type Call,
  ErrorCode,
  type Frame,
  type FrameBody,
  type KernelArg,
} from "@vgpu-ha/common/core";
import fc from "fast-check";
import type { BackendOptions, FrameOutcome } from "../paravirt/backend.js";
import { Backend } from "../paravirt/backend.js";
import { SessionRecord } from "../paravirt/session-table.js";

const PAGE_BYTES = 4096;

/**
 * What the generator stays within, and so what a backend must allow for the recorded
 * expectations to hold (backendOptionsFor builds such options).
 */
export const WORKLOAD_LIMITS = {
  /** Largest buffer the generator allocates (a backend's maxBoBytes must be at least this). */
  maxBoBytes: 64 << 10,
  /** Live buffer bytes per tenant the generator never exceeds (≤ quota; VRAM ≥ sum). */
  liveBytesPerTenant: 2 << 20,
  /** Live buffers per tenant the generator never exceeds (≤ quota). */
  liveBosPerTenant: 48,
  contextsPerSession: 3,
  bosPerContext: 6,
  /** Largest valid DMA or copy of one call; a backend's maxDmaBytes must be ≥ this. */
  maxTransferBytes: 4096,
  /** The length of the "DMA too big" fault; a backend's maxDmaBytes must be below it. */
  oversizeDmaBytes: (1 << 20) + 1,
  /** Stores in one valid batch; a backend's maxStoresPerBatch must be ≥ this. */
  maxStoresPerBatch: 16,
  /** Re-sends repeat one of the session's last this-many frames (reply cache must hold them). */
  resendWindowFrames: 8,
  /**
   * Largest work of a valid launch: a histogram of a whole 64 KiB input (16384 elements at 32
   * units each) into 256 bins; a backend's maxKernelWork must be ≥ this.
   */
  maxKernelWork: ((64 << 10) / 4) * 32 + 256,
} as const;

/** Every kernel the generator launches; a test checks this is the device's whole library. */
export const WORKLOAD_KERNELS = [
  "fill",
  "copy",
  "add_u32",
  "increment_u32",
  "saxpy_f32",
  "gemm_f32",
  "reduce_sum_f32",
  "stencil2d_f32",
  "histogram_u32",
] as const;

export interface WorkloadOptions {
  readonly frames: number;
  /** Sessions, named s0, s1, …; default 2. */
  readonly sessions?: number;
  /** Tenants t0, t1, …; session i belongs to tenant i mod tenants; default 2. */
  readonly tenants?: number;
  /** Percentage of frames that carry a deliberate fault; default 10. */
  readonly invalidPercent?: number;
  /** Percentage of frames that re-send a recent frame of the session; default 3. */
  readonly resendPercent?: number;
}

/** What the backend must answer to a step, by the generator's model. */
export interface Expectation {
  readonly outcome: "applied" | "duplicate";
  readonly code: ErrorCode;
  /** The guest handle a successful contextCreate or boAlloc returns. */
  readonly handle?: number;
  /** Which generator action made the frame (for coverage checks and failure messages). */
  readonly action: string;
}

export interface WorkloadStep {
  readonly session: string;
  readonly frame: Frame;
  readonly expect: Expectation;
}

export interface WorkloadSession {
  readonly id: string;
  readonly tenant: string;
}

export interface Workload {
  readonly seed: number;
  readonly sessions: readonly WorkloadSession[];
  readonly steps: readonly WorkloadStep[];
}

/** A small seeded PRNG (splitmix32); independent of the device's handle generator. */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = (seed ^ 0x5851f42d) >>> 0;
  }

  u32(): number {
    this.state = (this.state + 0x9e3779b9) >>> 0;
    let z = this.state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  }

  /** An integer in [0, bound). */
  below(bound: number): number {
    return Math.floor((this.u32() / 2 ** 32) * bound);
  }

  /** An integer in [lo, hi]. */
  between(lo: number, hi: number): number {
    return lo + this.below(hi - lo + 1);
  }

  chance(percent: number): boolean {
    return this.below(100) < percent;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty list");
    return items[this.below(items.length)]!;
  }

  bytes(length: number): Uint8Array {
    const out = new Uint8Array(length);
    for (let i = 0; i < length; i++) out[i] = this.below(256);
    // Some runs of zeros and of one value, as real data has.
    if (length > 8 && this.chance(30)) out.fill(this.chance(50) ? 0 : 0xff, 0, this.below(length));
    return out;
  }

  /** A float32 value, now and then a special one. */
  f32(): number {
    if (this.chance(10)) return this.pick([Number.NaN, Infinity, -Infinity, -0, 0, 1]);
    return Math.fround((this.u32() / 2 ** 32 - 0.5) * 8);
  }
}

interface ModelBo {
  readonly handle: number;
  readonly sizeBytes: number;
  mapped: boolean;
}

interface ModelContext {
  readonly handle: number;
  readonly bos: ModelBo[];
  nextBo: number;
  /** BO handles once live here and freed since: a never-reused guest handle is unknown. */
  readonly freedBos: number[];
}

interface ModelSession {
  readonly id: string;
  readonly tenant: string;
  readonly contexts: ModelContext[];
  lastFrame: number;
  /** The last frames sent, for re-sends. */
  readonly recent: { frame: Frame; code: ErrorCode }[];
}

interface Planned {
  readonly body: FrameBody;
  readonly code: ErrorCode;
  readonly handle?: number;
  readonly action: string;
}

const call = (c: Call): FrameBody => ({ kind: "call", call: c });
const buffer = (bo: number): KernelArg => ({ kind: "buffer", bo });
const u32 = (value: number): KernelArg => ({ kind: "u32", value });
const f32 = (value: number): KernelArg => ({ kind: "f32", value });
const elements = (bo: ModelBo) => bo.sizeBytes / 4;
const alignDown = (x: number, width: number) => x - (x % width);

/** A generator of one workload; use generateWorkload. */
class WorkloadBuilder {
  private readonly rng: Rng;
  private readonly sessions: ModelSession[];
  private readonly usage = new Map<string, { bytes: number; bos: number }>();
  private nextContext = 1;
  private readonly destroyedContexts: number[] = [];

  constructor(seed: number, sessions: readonly WorkloadSession[]) {
    this.rng = new Rng(seed);
    this.sessions = sessions.map((s) => ({ ...s, contexts: [], lastFrame: 0, recent: [] }));
    for (const s of sessions) this.usage.set(s.tenant, { bytes: 0, bos: 0 });
  }

  step(invalidPercent: number, resendPercent: number): WorkloadStep {
    const { rng } = this;
    const s = rng.pick(this.sessions);
    if (s.recent.length > 0 && rng.chance(resendPercent)) {
      const old = rng.pick(s.recent);
      return {
        session: s.id,
        frame: old.frame,
        expect: { outcome: "duplicate", code: old.code, action: "resend" },
      };
    }
    const planned = rng.chance(invalidPercent) ? this.invalid(s) : this.valid(s);
    s.lastFrame++;
    const frame: Frame = { number: s.lastFrame, body: planned.body };
    s.recent.push({ frame, code: planned.code });
    if (s.recent.length > WORKLOAD_LIMITS.resendWindowFrames) s.recent.shift();
    const expect: Expectation = {
      outcome: "applied",
      code: planned.code,
      action: planned.action,
      ...(planned.handle === undefined ? {} : { handle: planned.handle }),
    };
    return { session: s.id, frame, expect };
  }

  // ---- valid frames ----

  private valid(s: ModelSession): Planned {
    if (s.contexts.length === 0) return this.contextCreate(s);
    const ctx = this.rng.pick(s.contexts);
    const actions: [number, () => Planned | null][] = [
      [2, () => this.contextCreate(s)],
      [1, () => this.contextDestroy(s, ctx)],
      [5, () => this.boAlloc(s, ctx)],
      [2, () => this.boFree(s, ctx)],
      [3, () => this.boMap(ctx)],
      [1, () => this.boUnmap(ctx)],
      [4, () => this.dmaWrite(ctx)],
      [2, () => this.dmaRead(ctx)],
      [2, () => this.boCopy(ctx)],
      [6, () => this.kernelLaunch(ctx)],
      [1, () => this.fence(ctx)],
      [7, () => this.stores(ctx)],
    ];
    for (let attempt = 0; attempt < 8; attempt++) {
      const planned = this.weighted(actions)();
      if (planned !== null) return planned;
    }
    return this.fence(ctx);
  }

  private weighted<T>(choices: readonly [number, T][]): T {
    const total = choices.reduce((sum, [w]) => sum + w, 0);
    let at = this.rng.below(total);
    for (const [w, choice] of choices) {
      if (at < w) return choice;
      at -= w;
    }
    return choices[choices.length - 1]![1];
  }

  private contextCreate(s: ModelSession): Planned {
    if (s.contexts.length >= WORKLOAD_LIMITS.contextsPerSession) {
      return this.fence(this.rng.pick(s.contexts));
    }
    const handle = this.nextContext++;
    s.contexts.push({ handle, bos: [], nextBo: 1, freedBos: [] });
    return {
      body: call({ op: "contextCreate" }),
      code: ErrorCode.OK,
      handle,
      action: "contextCreate",
    };
  }

  private contextDestroy(s: ModelSession, ctx: ModelContext): Planned {
    const used = this.usage.get(s.tenant)!;
    for (const bo of ctx.bos) {
      used.bytes -= bo.sizeBytes;
      used.bos--;
    }
    s.contexts.splice(s.contexts.indexOf(ctx), 1);
    this.destroyedContexts.push(ctx.handle);
    return ok(call({ op: "contextDestroy", context: ctx.handle }), "contextDestroy");
  }

  private boAlloc(s: ModelSession, ctx: ModelContext): Planned | null {
    const { rng } = this;
    if (ctx.bos.length >= WORKLOAD_LIMITS.bosPerContext) return null;
    const sizeBytes = rng.chance(50)
      ? rng.pick([PAGE_BYTES, 2 * PAGE_BYTES, 16 << 10, WORKLOAD_LIMITS.maxBoBytes])
      : rng.between(1, WORKLOAD_LIMITS.maxBoBytes);
    const rounded = Math.ceil(sizeBytes / PAGE_BYTES) * PAGE_BYTES;
    const used = this.usage.get(s.tenant)!;
    if (
      used.bos + 1 > WORKLOAD_LIMITS.liveBosPerTenant ||
      used.bytes + rounded > WORKLOAD_LIMITS.liveBytesPerTenant
    ) {
      return null;
    }
    used.bos++;
    used.bytes += rounded;
    const handle = ctx.nextBo++;
    ctx.bos.push({ handle, sizeBytes: rounded, mapped: false });
    return {
      body: call({ op: "boAlloc", context: ctx.handle, sizeBytes }),
      code: ErrorCode.OK,
      handle,
      action: "boAlloc",
    };
  }

  private boFree(s: ModelSession, ctx: ModelContext): Planned | null {
    if (ctx.bos.length === 0) return null;
    const bo = this.rng.pick(ctx.bos);
    ctx.bos.splice(ctx.bos.indexOf(bo), 1);
    ctx.freedBos.push(bo.handle);
    const used = this.usage.get(s.tenant)!;
    used.bos--;
    used.bytes -= bo.sizeBytes;
    return ok(call({ op: "boFree", context: ctx.handle, bo: bo.handle }), "boFree");
  }

  private boMap(ctx: ModelContext): Planned | null {
    const unmapped = ctx.bos.filter((bo) => !bo.mapped);
    if (unmapped.length === 0) return null;
    const bo = this.rng.pick(unmapped);
    bo.mapped = true;
    return ok(call({ op: "boMap", context: ctx.handle, bo: bo.handle }), "boMap");
  }

  private boUnmap(ctx: ModelContext): Planned | null {
    const mapped = ctx.bos.filter((bo) => bo.mapped);
    if (mapped.length === 0) return null;
    const bo = this.rng.pick(mapped);
    bo.mapped = false;
    return ok(call({ op: "boUnmap", context: ctx.handle, bo: bo.handle }), "boUnmap");
  }

  /** A range [offset, offset+length) inside `size`, at most maxTransferBytes long. */
  private range(size: number): { offset: number; length: number } {
    const { rng } = this;
    const offset = rng.chance(40) ? PAGE_BYTES * rng.below(size / PAGE_BYTES) : rng.below(size);
    const room = Math.min(size - offset, WORKLOAD_LIMITS.maxTransferBytes);
    const length = rng.chance(5) ? 0 : rng.between(1, room);
    return { offset, length };
  }

  private dmaWrite(ctx: ModelContext): Planned | null {
    if (ctx.bos.length === 0) return null;
    const bo = this.rng.pick(ctx.bos);
    const { offset, length } = this.range(bo.sizeBytes);
    const data = this.rng.bytes(length);
    return ok(
      call({ op: "dmaWrite", context: ctx.handle, bo: bo.handle, offset, data }),
      "dmaWrite",
    );
  }

  private dmaRead(ctx: ModelContext): Planned | null {
    if (ctx.bos.length === 0) return null;
    const bo = this.rng.pick(ctx.bos);
    const { offset, length } = this.range(bo.sizeBytes);
    return ok(
      call({ op: "dmaRead", context: ctx.handle, bo: bo.handle, offset, length }),
      "dmaRead",
    );
  }

  private boCopy(ctx: ModelContext): Planned | null {
    if (ctx.bos.length === 0) return null;
    const { rng } = this;
    const src = rng.pick(ctx.bos);
    const dst = rng.pick(ctx.bos);
    const limit = Math.min(src.sizeBytes, dst.sizeBytes);
    const { length } = this.range(limit);
    const srcOffset = rng.below(src.sizeBytes - length + 1);
    const dstOffset = rng.below(dst.sizeBytes - length + 1);
    return ok(
      call({
        op: "boCopy",
        context: ctx.handle,
        srcBo: src.handle,
        srcOffset,
        dstBo: dst.handle,
        dstOffset,
        length,
      }),
      "boCopy",
    );
  }

  private fence(ctx: ModelContext): Planned {
    return ok(call({ op: "fence", context: ctx.handle }), "fence");
  }

  /** An element count for buffers of `capacity` elements: small mostly, now and then all. */
  private count(capacity: number): number {
    if (this.rng.chance(15)) return capacity;
    return this.rng.below(Math.min(capacity, 2048) + 1);
  }

  private kernelLaunch(ctx: ModelContext): Planned | null {
    if (ctx.bos.length === 0) return null;
    const { rng } = this;
    const any = () => rng.pick(ctx.bos);
    // Two buffers that must differ; null when the context has only one.
    const distinct = (): [ModelBo, ModelBo] | null => {
      if (ctx.bos.length < 2) return null;
      const a = any();
      const others = ctx.bos.filter((bo) => bo !== a);
      return [a, rng.pick(others)];
    };
    const kernel = rng.pick(WORKLOAD_KERNELS);
    const args = this.kernelArgs(kernel, any, distinct);
    if (args === null) return null;
    return ok(call({ op: "kernelLaunch", context: ctx.handle, kernel, args }), `kernel:${kernel}`);
  }

  private kernelArgs(
    kernel: (typeof WORKLOAD_KERNELS)[number],
    any: () => ModelBo,
    distinct: () => [ModelBo, ModelBo] | null,
  ): KernelArg[] | null {
    const { rng } = this;
    switch (kernel) {
      case "fill": {
        const dst = any();
        return [buffer(dst.handle), u32(this.count(elements(dst))), u32(rng.u32())];
      }
      case "increment_u32": {
        const buf = any();
        return [buffer(buf.handle), u32(this.count(elements(buf))), u32(rng.u32())];
      }
      case "copy": {
        const [dst, src] = [any(), any()];
        const n = this.count(Math.min(elements(dst), elements(src)));
        return [buffer(dst.handle), buffer(src.handle), u32(n)];
      }
      case "add_u32": {
        const [dst, a, b] = [any(), any(), any()];
        const n = this.count(Math.min(elements(dst), elements(a), elements(b)));
        return [buffer(dst.handle), buffer(a.handle), buffer(b.handle), u32(n)];
      }
      case "saxpy_f32": {
        const [y, x] = [any(), any()];
        const n = this.count(Math.min(elements(y), elements(x)));
        return [buffer(y.handle), buffer(x.handle), u32(n), f32(rng.f32())];
      }
      case "gemm_f32": {
        const pair = distinct();
        if (pair === null) return null;
        const [c, a] = pair;
        // b may alias a, never c. 32×32 fits any buffer (at least 1024 elements).
        const candidate = any();
        const b = candidate === c || rng.chance(30) ? a : candidate;
        const [m, n, k] = [rng.below(33), rng.below(33), rng.below(33)];
        return [buffer(c.handle), buffer(a.handle), buffer(b.handle), u32(m), u32(n), u32(k)];
      }
      case "reduce_sum_f32": {
        const pair = distinct();
        if (pair === null) return null;
        const [out, input] = pair;
        return [buffer(out.handle), buffer(input.handle), u32(this.count(elements(input)))];
      }
      case "stencil2d_f32": {
        const pair = distinct();
        if (pair === null) return null;
        const [dst, src] = pair;
        const [width, height] = [rng.between(1, 32), rng.between(1, 32)];
        return [
          buffer(dst.handle),
          buffer(src.handle),
          u32(width),
          u32(height),
          u32(rng.below(4)),
          f32(rng.chance(80) ? Math.fround(rng.below(25) / 100) : rng.f32()),
        ];
      }
      case "histogram_u32": {
        const pair = distinct();
        if (pair === null) return null;
        const [hist, input] = pair;
        const bins = rng.between(1, Math.min(elements(hist), 256));
        return [
          buffer(hist.handle),
          buffer(input.handle),
          u32(this.count(elements(input))),
          u32(bins),
        ];
      }
    }
  }

  private stores(ctx: ModelContext): Planned | null {
    const mapped = ctx.bos.filter((bo) => bo.mapped);
    if (mapped.length === 0) return null;
    const bo = this.rng.pick(mapped);
    const body = this.storeBody(ctx, bo, this.rng.between(1, WORKLOAD_LIMITS.maxStoresPerBatch));
    return ok(body, "stores");
  }

  /** `count` valid stores into `bo`, clustered on a page so some are adjacent or repeated. */
  private storeBody(ctx: ModelContext, bo: ModelBo, count: number): FrameBody {
    const { rng } = this;
    const offsets: number[] = [];
    const widths: number[] = [];
    let page = rng.below(bo.sizeBytes / PAGE_BYTES);
    let cursor = page * PAGE_BYTES + rng.below(PAGE_BYTES);
    for (let i = 0; i < count; i++) {
      const width = rng.pick([1, 2, 4, 8]);
      if (rng.chance(10)) page = rng.below(bo.sizeBytes / PAGE_BYTES);
      let offset: number;
      if (rng.chance(50)) offset = Math.ceil(cursor / width) * width;
      else if (rng.chance(20) && offsets.length > 0) offset = alignDown(rng.pick(offsets), width);
      else offset = alignDown(page * PAGE_BYTES + rng.below(PAGE_BYTES), width);
      if (offset + width > bo.sizeBytes) offset = bo.sizeBytes - width;
      offsets.push(offset);
      widths.push(width);
      cursor = offset + width;
    }
    const data = rng.bytes(widths.reduce((sum, w) => sum + w, 0));
    return {
      kind: "stores",
      batch: {
        context: ctx.handle,
        bo: bo.handle,
        offsets,
        widths: Uint8Array.from(widths),
        data,
      },
    };
  }

  // ---- deliberate faults: each has exactly one, so its code is certain ----

  private invalid(s: ModelSession): Planned {
    const faults: (() => Planned | null)[] = [
      () => this.unknownContext(),
      () => this.foreignContext(s),
      () => this.unknownBo(s),
      () => this.foreignBo(s),
      () => this.dmaOutOfBounds(s),
      () => this.dmaTooBig(s),
      () => this.copyOutOfBounds(s),
      () => this.badAllocSize(s),
      () => this.badLaunch(s),
      () => this.mapState(s),
      () => this.badStores(s),
    ];
    for (let attempt = 0; attempt < 8; attempt++) {
      const planned = this.rng.pick(faults)();
      if (planned !== null) return planned;
    }
    return this.unknownContext();
  }

  /** One of the session's buffers, with its context; null when the session has none. */
  private contextWithBo(s: ModelSession): { ctx: ModelContext; bo: ModelBo } | null {
    const withBos = s.contexts.filter((ctx) => ctx.bos.length > 0);
    if (withBos.length === 0) return null;
    const ctx = this.rng.pick(withBos);
    return { ctx, bo: this.rng.pick(ctx.bos) };
  }

  /** A random call naming context `context` (and maybe buffer `bo`), valid otherwise. */
  private callNaming(context: number, bo: number): FrameBody {
    switch (this.rng.below(3)) {
      case 0:
        return call({ op: "fence", context });
      case 1:
        return call({ op: "boAlloc", context, sizeBytes: PAGE_BYTES });
      default:
        return this.callNamingBo(context, bo);
    }
  }

  /** A random call or store batch naming buffer `bo` of context `context`, valid otherwise. */
  private callNamingBo(context: number, bo: number): FrameBody {
    const { rng } = this;
    switch (rng.below(7)) {
      case 0:
        return call({ op: "boUnmap", context, bo });
      case 1:
        return call({ op: "boFree", context, bo });
      case 2:
        return call({ op: "boMap", context, bo });
      case 3:
        return call({ op: "dmaWrite", context, bo, offset: 0, data: rng.bytes(8) });
      case 4:
        return call({ op: "dmaRead", context, bo, offset: 0, length: 8 });
      case 5:
        return call({
          op: "kernelLaunch",
          context,
          kernel: "fill",
          args: [buffer(bo), u32(1), u32(7)],
        });
      default:
        return {
          kind: "stores",
          batch: { context, bo, offsets: [0], widths: Uint8Array.of(4), data: rng.bytes(4) },
        };
    }
  }

  private unknownContext(): Planned {
    const { rng } = this;
    const handle =
      this.destroyedContexts.length > 0 && rng.chance(50)
        ? rng.pick(this.destroyedContexts)
        : rng.pick([0, -1, 2 ** 32, this.nextContext + 1000 + rng.below(1000)]);
    const body = rng.chance(20)
      ? call({ op: "contextDestroy", context: handle })
      : this.callNaming(handle, 1);
    return { body, code: ErrorCode.UNKNOWN_CONTEXT, action: "fault:unknownContext" };
  }

  private foreignContext(s: ModelSession): Planned | null {
    const foreign = this.sessions.filter((o) => o !== s).flatMap((o) => o.contexts);
    if (foreign.length === 0) return null;
    const ctx = this.rng.pick(foreign);
    const bo = ctx.bos.length > 0 ? this.rng.pick(ctx.bos).handle : 1;
    return {
      body: this.callNaming(ctx.handle, bo),
      code: ErrorCode.UNKNOWN_CONTEXT,
      action: "fault:foreignContext",
    };
  }

  private unknownBo(s: ModelSession): Planned | null {
    if (s.contexts.length === 0) return null;
    const { rng } = this;
    const ctx = rng.pick(s.contexts);
    const bo =
      ctx.freedBos.length > 0 && rng.chance(50)
        ? rng.pick(ctx.freedBos)
        : rng.pick([0, -1, ctx.nextBo + rng.below(100)]);
    return this.unknownBoCall(ctx, bo, "fault:unknownBo");
  }

  /** A BO handle live in another context (this session's or another's) but not in this one. */
  private foreignBo(s: ModelSession): Planned | null {
    if (s.contexts.length === 0) return null;
    const ctx = this.rng.pick(s.contexts);
    const elsewhere = this.sessions
      .flatMap((o) => o.contexts)
      .filter((o) => o !== ctx)
      .flatMap((o) => o.bos.map((bo) => bo.handle))
      .filter((h) => !ctx.bos.some((bo) => bo.handle === h));
    if (elsewhere.length === 0) return null;
    return this.unknownBoCall(ctx, this.rng.pick(elsewhere), "fault:foreignBo");
  }

  private unknownBoCall(ctx: ModelContext, bo: number, action: string): Planned {
    const { rng } = this;
    const live = ctx.bos.length > 0 ? rng.pick(ctx.bos).handle : undefined;
    let body: FrameBody;
    if (live !== undefined && rng.chance(30)) {
      // The unknown handle next to a valid one: in a copy, or in a launch's second buffer slot.
      body = rng.chance(50)
        ? call({
            op: "boCopy",
            context: ctx.handle,
            srcBo: live,
            srcOffset: 0,
            dstBo: bo,
            dstOffset: 0,
            length: 4,
          })
        : call({
            op: "kernelLaunch",
            context: ctx.handle,
            kernel: "copy",
            args: [buffer(live), buffer(bo), u32(1)],
          });
    } else {
      body = this.callNamingBo(ctx.handle, bo);
    }
    return { body, code: ErrorCode.UNKNOWN_BO, action };
  }

  private dmaOutOfBounds(s: ModelSession): Planned | null {
    const found = this.contextWithBo(s);
    if (found === null) return null;
    const { ctx, bo } = found;
    const { rng } = this;
    const size = bo.sizeBytes;
    const [offset, length] = rng.pick<[number, number]>([
      [size - 3, 4],
      [size, 1],
      [size + PAGE_BYTES, 0],
      [-1, 4],
      [0.5, 4],
      [Number.MAX_SAFE_INTEGER, 2],
      [2 ** 53, 1],
      [2 ** 64, 1],
      [Number.NaN, 1],
      [Infinity, 1],
    ]);
    if (rng.chance(50)) {
      const readLength = rng.chance(20) ? rng.pick([-1, 1.5, Number.NaN]) : length;
      const readOffset = Number.isNaN(readLength) || readLength === -1 ? 0 : offset;
      return {
        body: call({
          op: "dmaRead",
          context: ctx.handle,
          bo: bo.handle,
          offset: readOffset,
          length: readLength,
        }),
        code: ErrorCode.OUT_OF_BOUNDS,
        action: "fault:dmaOutOfBounds",
      };
    }
    return {
      body: call({
        op: "dmaWrite",
        context: ctx.handle,
        bo: bo.handle,
        offset,
        data: rng.bytes(length),
      }),
      code: ErrorCode.OUT_OF_BOUNDS,
      action: "fault:dmaOutOfBounds",
    };
  }

  private dmaTooBig(s: ModelSession): Planned | null {
    const found = this.contextWithBo(s);
    if (found === null) return null;
    const { ctx, bo } = found;
    return {
      body: call({
        op: "dmaRead",
        context: ctx.handle,
        bo: bo.handle,
        offset: 0,
        length: WORKLOAD_LIMITS.oversizeDmaBytes,
      }),
      code: ErrorCode.LIMIT_EXCEEDED,
      action: "fault:dmaTooBig",
    };
  }

  private copyOutOfBounds(s: ModelSession): Planned | null {
    const found = this.contextWithBo(s);
    if (found === null) return null;
    const { ctx, bo } = found;
    const other = this.rng.pick(ctx.bos);
    const [srcOffset, dstOffset, length] = this.rng.pick<[number, number, number]>([
      [bo.sizeBytes - 1, 0, 2],
      [0, other.sizeBytes - 1, 2],
      [0, 0, Math.max(bo.sizeBytes, other.sizeBytes) + 1],
      [-4, 0, 4],
      [0, 2 ** 53, 4],
      [0, 0, -1],
    ]);
    return {
      body: call({
        op: "boCopy",
        context: ctx.handle,
        srcBo: bo.handle,
        srcOffset,
        dstBo: other.handle,
        dstOffset,
        length,
      }),
      code: ErrorCode.OUT_OF_BOUNDS,
      action: "fault:copyOutOfBounds",
    };
  }

  private badAllocSize(s: ModelSession): Planned | null {
    if (s.contexts.length === 0) return null;
    const ctx = this.rng.pick(s.contexts);
    const sizeBytes = this.rng.pick([0, -PAGE_BYTES, 1.5, Number.NaN, 2 ** 40, Infinity]);
    return {
      body: call({ op: "boAlloc", context: ctx.handle, sizeBytes }),
      code: ErrorCode.INVALID_SIZE,
      action: "fault:badAllocSize",
    };
  }

  private badLaunch(s: ModelSession): Planned | null {
    const found = this.contextWithBo(s);
    if (found === null) return null;
    const { ctx, bo } = found;
    const { rng } = this;
    const b = buffer(bo.handle);
    const choices: [ErrorCode, string, KernelArg[]][] = [
      [ErrorCode.UNKNOWN_KERNEL, rng.pick(["nope", "", "FILL", "fill "]), [b, u32(1), u32(1)]],
      [ErrorCode.BAD_KERNEL_ARGS, "fill", [b, u32(1)]],
      [ErrorCode.BAD_KERNEL_ARGS, "fill", [b, u32(1), u32(1), u32(1)]],
      [ErrorCode.BAD_KERNEL_ARGS, "fill", [u32(bo.handle), u32(1), u32(1)]],
      [ErrorCode.BAD_KERNEL_ARGS, "fill", [b, b, u32(1)]],
      [ErrorCode.BAD_KERNEL_ARGS, "fill", [b, u32(elements(bo) + 1), u32(1)]],
      [ErrorCode.BAD_KERNEL_ARGS, "fill", [b, u32(rng.pick([-1, 2 ** 32, 0.5])), u32(1)]],
      [ErrorCode.BAD_KERNEL_ARGS, "saxpy_f32", [b, b, u32(1), f32(0.1)]],
      [ErrorCode.BAD_KERNEL_ARGS, "gemm_f32", [b, b, b, u32(1), u32(1), u32(1)]],
      [ErrorCode.BAD_KERNEL_ARGS, "histogram_u32", [b, b, u32(1), u32(1)]],
    ];
    const [code, kernel, args] = rng.pick(choices);
    return {
      body: call({ op: "kernelLaunch", context: ctx.handle, kernel, args }),
      code,
      action: "fault:badLaunch",
    };
  }

  private mapState(s: ModelSession): Planned | null {
    const found = this.contextWithBo(s);
    if (found === null) return null;
    const { ctx, bo } = found;
    return bo.mapped
      ? {
          body: call({ op: "boMap", context: ctx.handle, bo: bo.handle }),
          code: ErrorCode.ALREADY_MAPPED,
          action: "fault:mapState",
        }
      : {
          body: call({ op: "boUnmap", context: ctx.handle, bo: bo.handle }),
          code: ErrorCode.NOT_MAPPED,
          action: "fault:mapState",
        };
  }

  private badStores(s: ModelSession): Planned | null {
    const found = this.contextWithBo(s);
    if (found === null) return null;
    const { ctx, bo } = found;
    const { rng } = this;
    const good = this.storeBody(ctx, bo, rng.between(1, 4));
    if (good.kind !== "stores") throw new Error("unreachable");
    if (!bo.mapped) return { body: good, code: ErrorCode.NOT_MAPPED, action: "fault:stores" };
    const offsets = [...Array.from(good.batch.offsets)];
    const widths = [...good.batch.widths];
    // One bad store among good ones: the whole batch is refused.
    const [code, offset, width] = rng.pick<[ErrorCode, number, number]>([
      [ErrorCode.BAD_STORE, 2, 4],
      [ErrorCode.BAD_STORE, 4, 8],
      [ErrorCode.BAD_STORE, 0, 3],
      [ErrorCode.BAD_STORE, 0, 0],
      [ErrorCode.BAD_STORE, 0, 16],
      [ErrorCode.OUT_OF_BOUNDS, bo.sizeBytes, 1],
      [ErrorCode.OUT_OF_BOUNDS, bo.sizeBytes, 8],
      [ErrorCode.OUT_OF_BOUNDS, -8, 8],
    ]);
    const at = rng.below(offsets.length + 1);
    offsets.splice(at, 0, offset);
    widths.splice(at, 0, width);
    let dataBytes = widths.reduce((sum, w) => sum + w, 0);
    let malformed = false;
    if (rng.chance(30)) {
      // Instead: every store good, but the data, or the widths, do not match the offsets.
      offsets.splice(at, 1);
      widths.splice(at, 1);
      dataBytes = widths.reduce((sum, w) => sum + w, 0);
      if (rng.chance(50)) dataBytes += rng.pick([-1, 1]);
      else offsets.push(0);
      malformed = true;
    }
    return {
      body: {
        kind: "stores",
        batch: {
          context: ctx.handle,
          bo: bo.handle,
          offsets,
          widths: Uint8Array.from(widths),
          data: rng.bytes(dataBytes),
        },
      },
      code: malformed ? ErrorCode.MALFORMED : code,
      action: "fault:stores",
    };
  }
}

function ok(body: FrameBody, action: string): Planned {
  return { body, code: ErrorCode.OK, action };
}

/** The sessions of a workload: `sessions` of them over `tenants` tenants. */
function workloadSessions(sessions: number, tenants: number): WorkloadSession[] {
  return Array.from({ length: sessions }, (_, i) => ({ id: `s${i}`, tenant: `t${i % tenants}` }));
}

/** A random workload, a pure function of seed and options. */
export function generateWorkload(seed: number, options: WorkloadOptions): Workload {
  const sessions = workloadSessions(options.sessions ?? 2, options.tenants ?? 2);
  const builder = new WorkloadBuilder(seed, sessions);
  const steps: WorkloadStep[] = [];
  for (let i = 0; i < options.frames; i++) {
    steps.push(builder.step(options.invalidPercent ?? 10, options.resendPercent ?? 3));
  }
  return { seed, sessions, steps };
}

/** fast-check arbitrary of workloads of 1..maxFrames frames; shrinks to shorter prefixes. */
export function workloadArb(
  options: Omit<WorkloadOptions, "frames"> & { readonly maxFrames: number },
): fc.Arbitrary<Workload> {
  return fc
    .record({
      seed: fc.integer({ min: 0, max: 0x7fffffff }),
      frames: fc.integer({ min: 1, max: options.maxFrames }),
    })
    .map(({ seed, frames }) => generateWorkload(seed, { ...options, frames }));
}

/**
 * Backend options under which every expectation of `workload` holds: its tenants with quotas
 * above what the generator uses, and limits inside WORKLOAD_LIMITS. Only the device seed varies.
 */
export function backendOptionsFor(workload: Workload, deviceSeed: number): BackendOptions {
  const tenants = new Set(workload.sessions.map((s) => s.tenant));
  return {
    device: {
      seed: deviceSeed,
      vramBytes: tenants.size * WORKLOAD_LIMITS.liveBytesPerTenant,
      maxBoBytes: WORKLOAD_LIMITS.maxBoBytes,
      maxKernelWork: WORKLOAD_LIMITS.maxKernelWork,
    },
    tenants: new Map(
      [...tenants].map((t) => [
        t,
        { vramBytes: WORKLOAD_LIMITS.liveBytesPerTenant, bos: WORKLOAD_LIMITS.liveBosPerTenant },
      ]),
    ),
    session: {
      replyCacheFrames: 64,
      replyCacheBytes: WORKLOAD_LIMITS.resendWindowFrames * WORKLOAD_LIMITS.maxTransferBytes,
    },
    maxDmaBytes: WORKLOAD_LIMITS.oversizeDmaBytes - 1,
    maxStoresPerBatch: WORKLOAD_LIMITS.maxStoresPerBatch,
    trackMmio: true,
  };
}

/** Opens the workload's sessions on `backend`. */
export function openSessions(backend: Backend, workload: Workload): Map<string, SessionRecord> {
  const records = new Map<string, SessionRecord>();
  for (const { id, tenant } of workload.sessions) {
    const record = backend.openSession(id, tenant);
    if (!(record instanceof SessionRecord)) {
      throw new Error(`cannot open session ${id} of tenant ${tenant}: ${record.message}`);
    }
    records.set(id, record);
  }
  return records;
}

/** Opens the sessions and applies every step in order; the outcome of each step. */
export function runWorkload(backend: Backend, workload: Workload): FrameOutcome[] {
  const records = openSessions(backend, workload);
  return workload.steps.map((step) => backend.applyFrame(records.get(step.session)!, step.frame));
}

/** A backend for `workload` with the given device seed, with the workload applied. */
export function replay(
  workload: Workload,
  deviceSeed: number,
): {
  backend: Backend;
  outcomes: FrameOutcome[];
} {
  const backend = new Backend(backendOptionsFor(workload, deviceSeed));
  return { backend, outcomes: runWorkload(backend, workload) };
}
