// The paravirtual backend: the system-call layer in front of the device. It validates every
// call, owns the guest-handle tables (guest handles are assigned here from counters that never
// reuse a value, and map to the device's own handles), tenants and their quotas, the session
// table with frame ordering and cached replies, and the MMIO trap. Both roles drive it the same
// way; a failing call changes no GPU state.
import {
  type Call,
  type CallResult,
  ErrorCode,
  type Frame,
  type FrameRecord,
  invariant,
  NO_OUTPUT,
  type PageWrite,
  type SessionCloseReason,
  type SnapshotMeta,
  type StoreBatch,
} from "@vgpu-ha/common/core";
import type { BufferObject } from "../device/buffer-object.js";
import {
  Device,
  type DeviceArg,
  type DeviceContext,
  type DeviceOptions,
} from "../device/device.js";
import { type Failure, fail, inRange } from "../device/failure.js";
import { PAGE_SIZE_BYTES } from "../device/vram.js";
import { EndedSessions } from "./ended-sessions.js";
import { type DirtyPage, MmioTracker, type TrackedBuffer } from "./mmio-tracker.js";
import { type SessionLimits, SessionRecord } from "./session-table.js";

export interface TenantQuota {
  readonly vramBytes: number;
  readonly bos: number;
  /** Contexts at once, over all the tenant's sessions (unlimited when left out). */
  readonly contexts?: number;
}

export interface BackendOptions {
  readonly device: DeviceOptions;
  readonly tenants: ReadonlyMap<string, TenantQuota>;
  readonly session: SessionLimits;
  /** Largest DMA read or write of one call. */
  readonly maxDmaBytes: number;
  readonly maxStoresPerBatch: number;
  /** Record dirty pages for replication; a standalone node may switch it off. */
  readonly trackMmio: boolean;
}

export type FrameOutcome =
  /** The frame was the session's next and was executed (its result may be an error). */
  | { readonly kind: "applied"; readonly result: CallResult }
  /** A re-send of a frame already applied: its cached reply; nothing executed again. */
  | { readonly kind: "duplicate"; readonly result: CallResult }
  /** Not applied at all (out of order, or repeated with no cached reply); nothing changed. */
  | { readonly kind: "rejected"; readonly result: CallResult };

export interface GuestBo extends TrackedBuffer {
  readonly bo: BufferObject;
}

export class GuestContext {
  readonly handle: number;
  readonly tenant: string;
  readonly sessionId: string;
  readonly device: DeviceContext;
  readonly bos = new Map<number, GuestBo>();
  nextBoHandle = 1;
  fenceValue = 0;

  constructor(handle: number, tenant: string, sessionId: string, device: DeviceContext) {
    this.handle = handle;
    this.tenant = tenant;
    this.sessionId = sessionId;
    this.device = device;
  }
}

interface TenantUsage {
  vramBytes: number;
  bos: number;
  contexts: number;
}

const ok = (output: CallResult["output"] = NO_OUTPUT): CallResult => ({
  code: ErrorCode.OK,
  message: "",
  output,
});
const failed = (f: Failure): CallResult => ({
  code: f.code,
  message: f.message,
  output: NO_OUTPUT,
});

export class Backend {
  readonly options: BackendOptions;
  readonly device: Device;
  readonly mmio = new MmioTracker();
  readonly contexts = new Map<number, GuestContext>();
  readonly sessions = new Map<string, SessionRecord>();
  /** Sessions closed by the idle reaper or an operator, for SESSION_EXPIRED on a resume. */
  readonly ended = new EndedSessions();
  private readonly usage = new Map<string, TenantUsage>();
  nextContextHandle = 1;
  /** Record dirty pages for replication (a primary in per-page mode); starts from options. */
  trackMmio: boolean;
  /**
   * Called before any guest-visible byte of a buffer changes, with the byte range about to
   * change. A snapshot in progress uses it to keep pages it has not sent yet (copy-on-write).
   */
  beforeWrite: ((gbo: GuestBo, start: number, end: number) => void) | undefined;

  constructor(options: BackendOptions) {
    this.options = options;
    this.device = new Device(options.device);
    this.trackMmio = options.trackMmio;
  }

  /**
   * A backend holding a snapshot's metadata: contexts and buffers (zero-filled, on this
   * node's own device), sessions with their replies, and the counters.
   */
  static restore(options: BackendOptions, meta: SnapshotMeta): Backend | Failure {
    const backend = new Backend(options);
    backend.nextContextHandle = meta.nextContextHandle;
    for (const s of meta.sessions) {
      const session = new SessionRecord(s.sessionId, s.tenant);
      session.lastFrame = s.lastFrame;
      for (const r of s.replies) session.remember(r.frame, r.result, options.session);
      backend.sessions.set(s.sessionId, session);
    }
    for (const c of meta.contexts) {
      const session = backend.sessions.get(c.sessionId);
      if (session === undefined)
        return fail(ErrorCode.MALFORMED, `context ${c.handle} of no session`);
      const ctx = new GuestContext(c.handle, c.tenant, c.sessionId, backend.device.createContext());
      ctx.nextBoHandle = c.nextBoHandle;
      ctx.fenceValue = c.fenceValue;
      backend.contexts.set(c.handle, ctx);
      session.contexts.add(c.handle);
      const used = backend.usageOf(c.tenant);
      used.contexts++;
      for (const b of c.bos) {
        const bo = backend.device.allocBo(ctx.device, b.sizeBytes);
        if ("code" in bo) return bo;
        bo.mapped = b.mapped;
        ctx.bos.set(b.handle, { context: c.handle, handle: b.handle, bo, bytes: bo.bytes });
        used.bos++;
        used.vramBytes += bo.byteLength;
      }
    }
    return backend;
  }

  // ---- sessions and frames ----

  openSession(id: string, tenant: string): Failure | SessionRecord {
    if (!this.options.tenants.has(tenant)) return fail(ErrorCode.UNAUTHENTICATED, "unknown tenant");
    invariant(!this.sessions.has(id), `session id ${id} opened twice`);
    const session = new SessionRecord(id, tenant);
    this.sessions.set(id, session);
    return session;
  }

  /**
   * Ends a session: its contexts (and their buffers) are destroyed. One ended by the idle
   * reaper or an operator is remembered (see EndedSessions).
   */
  closeSession(id: string, reason: SessionCloseReason = "guest"): void {
    const session = this.sessions.get(id);
    if (session === undefined) return;
    for (const handle of [...session.contexts]) this.destroyContext(this.contexts.get(handle)!);
    this.sessions.delete(id);
    if (reason !== "guest") this.ended.add(id, { tenant: session.tenant, reason });
  }

  /** Bytes of VRAM the session's buffers hold. */
  sessionVramBytes(id: string): number {
    let bytes = 0;
    for (const handle of this.sessions.get(id)?.contexts ?? []) {
      for (const gbo of this.contexts.get(handle)?.bos.values() ?? []) bytes += gbo.bo.byteLength;
    }
    return bytes;
  }

  /** Applies the session's next frame exactly once; see FrameOutcome. */
  applyFrame(session: SessionRecord, frame: Frame): FrameOutcome {
    if (this.sessions.get(session.id) !== session) {
      // A record kept past its session's close: nothing may run under it.
      return {
        kind: "rejected",
        result: failed(fail(ErrorCode.UNKNOWN_SESSION, "session closed")),
      };
    }
    if (frame.number <= session.lastFrame) {
      const cached = session.replies.get(frame.number);
      if (cached !== undefined) return { kind: "duplicate", result: cached };
      return {
        kind: "rejected",
        result: failed(
          fail(ErrorCode.FRAME_REPEATED, `frame ${frame.number} already applied, reply not cached`),
        ),
      };
    }
    if (frame.number !== session.lastFrame + 1) {
      return {
        kind: "rejected",
        result: failed(
          fail(
            ErrorCode.FRAME_OUT_OF_ORDER,
            `frame ${frame.number} is not the next frame (${session.lastFrame + 1})`,
          ),
        ),
      };
    }
    const result =
      frame.body.kind === "call"
        ? this.execute(session, frame.body.call)
        : this.applyStores(session, frame.body.batch);
    session.lastFrame = frame.number;
    session.remember(frame.number, result, this.options.session);
    return { kind: "applied", result };
  }

  // ---- calls ----

  execute(session: SessionRecord, call: Call): CallResult {
    switch (call.op) {
      case "contextCreate":
        return this.createContext(session);
      case "contextDestroy": {
        const ctx = this.ownContext(session, call.context);
        if (!(ctx instanceof GuestContext)) return failed(ctx);
        this.destroyContext(ctx);
        return ok();
      }
      case "boAlloc":
        return this.allocBo(session, call.context, call.sizeBytes);
      case "boFree": {
        const found = this.ownBo(session, call.context, call.bo);
        if ("code" in found) return failed(found);
        this.freeBo(found.ctx, found.gbo);
        return ok();
      }
      case "boMap":
      case "boUnmap":
        return this.setMapped(session, call.context, call.bo, call.op === "boMap");
      case "dmaWrite":
        return this.dmaWrite(session, call);
      case "dmaRead":
        return this.dmaRead(session, call);
      case "boCopy":
        return this.copy(session, call);
      case "kernelLaunch":
        return this.launch(session, call);
      case "fence": {
        const ctx = this.ownContext(session, call.context);
        if (!(ctx instanceof GuestContext)) return failed(ctx);
        // Execution is synchronous: every earlier call of the context has completed.
        ctx.fenceValue++;
        return ok({ kind: "fence", value: ctx.fenceValue });
      }
    }
  }

  private createContext(session: SessionRecord): CallResult {
    const quota = this.options.tenants.get(session.tenant)?.contexts ?? Number.POSITIVE_INFINITY;
    const used = this.usageOf(session.tenant);
    if (used.contexts + 1 > quota) {
      return failed(
        fail(ErrorCode.QUOTA_EXCEEDED, `tenant quota: ${used.contexts}/${quota} contexts`),
      );
    }
    used.contexts++;
    const handle = this.nextContextHandle++;
    const ctx = new GuestContext(handle, session.tenant, session.id, this.device.createContext());
    this.contexts.set(handle, ctx);
    session.contexts.add(handle);
    return ok({ kind: "handle", handle });
  }

  private destroyContext(ctx: GuestContext): void {
    for (const gbo of [...ctx.bos.values()]) this.freeBo(ctx, gbo);
    this.device.destroyContext(ctx.device);
    this.contexts.delete(ctx.handle);
    this.usageOf(ctx.tenant).contexts--;
    this.sessions.get(ctx.sessionId)?.contexts.delete(ctx.handle);
  }

  private allocBo(session: SessionRecord, context: number, sizeBytes: number): CallResult {
    const ctx = this.ownContext(session, context);
    if (!(ctx instanceof GuestContext)) return failed(ctx);
    const size = this.device.checkAllocSize(sizeBytes);
    if (typeof size !== "number") return failed(size);
    const quota = this.options.tenants.get(ctx.tenant)!;
    const used = this.usageOf(ctx.tenant);
    if (used.bos + 1 > quota.bos || used.vramBytes + size > quota.vramBytes) {
      return failed(
        fail(
          ErrorCode.QUOTA_EXCEEDED,
          `tenant quota: ${used.bos}/${quota.bos} buffers, ${used.vramBytes}+${size}/${quota.vramBytes} bytes`,
        ),
      );
    }
    const bo = this.device.allocBo(ctx.device, size);
    if ("code" in bo) return failed(bo);
    const handle = ctx.nextBoHandle++;
    ctx.bos.set(handle, { context: ctx.handle, handle, bo, bytes: bo.bytes });
    used.bos++;
    used.vramBytes += bo.byteLength;
    return ok({ kind: "handle", handle });
  }

  private freeBo(ctx: GuestContext, gbo: GuestBo): void {
    this.mmio.forget(gbo);
    ctx.bos.delete(gbo.handle);
    this.device.freeBo(ctx.device, gbo.bo.id);
    const used = this.usageOf(ctx.tenant);
    used.bos--;
    used.vramBytes -= gbo.bo.byteLength;
  }

  private setMapped(session: SessionRecord, context: number, bo: number, map: boolean): CallResult {
    const found = this.ownBo(session, context, bo);
    if ("code" in found) return failed(found);
    const target = found.gbo.bo;
    if (map && target.mapped) return failed(fail(ErrorCode.ALREADY_MAPPED, `buffer ${bo} mapped`));
    if (!map && !target.mapped)
      return failed(fail(ErrorCode.NOT_MAPPED, `buffer ${bo} not mapped`));
    target.mapped = map;
    return ok();
  }

  private dmaWrite(session: SessionRecord, call: Call & { op: "dmaWrite" }): CallResult {
    const found = this.ownBo(session, call.context, call.bo);
    if ("code" in found) return failed(found);
    const tooBig = this.checkDmaSize(call.data.byteLength);
    if (tooBig) return failed(tooBig);
    const bo = found.gbo.bo;
    if (this.beforeWrite && inRange(call.offset, call.data.byteLength, bo.byteLength)) {
      this.beforeWrite(found.gbo, call.offset, call.offset + call.data.byteLength);
    }
    const failure = this.device.dmaWrite(bo, call.offset, call.data);
    return failure ? failed(failure) : ok();
  }

  private dmaRead(session: SessionRecord, call: Call & { op: "dmaRead" }): CallResult {
    const found = this.ownBo(session, call.context, call.bo);
    if ("code" in found) return failed(found);
    const tooBig = this.checkDmaSize(call.length);
    if (tooBig) return failed(tooBig);
    const data = this.device.dmaRead(found.gbo.bo, call.offset, call.length);
    return data instanceof Uint8Array ? ok({ kind: "data", data }) : failed(data);
  }

  private copy(session: SessionRecord, call: Call & { op: "boCopy" }): CallResult {
    const src = this.ownBo(session, call.context, call.srcBo);
    if ("code" in src) return failed(src);
    const dst = this.ownBo(session, call.context, call.dstBo);
    if ("code" in dst) return failed(dst);
    if (this.beforeWrite && inRange(call.dstOffset, call.length, dst.gbo.bo.byteLength)) {
      this.beforeWrite(dst.gbo, call.dstOffset, call.dstOffset + call.length);
    }
    const failure = this.device.copy(
      src.gbo.bo,
      call.srcOffset,
      dst.gbo.bo,
      call.dstOffset,
      call.length,
    );
    return failure ? failed(failure) : ok();
  }

  private launch(session: SessionRecord, call: Call & { op: "kernelLaunch" }): CallResult {
    const ctx = this.ownContext(session, call.context);
    if (!(ctx instanceof GuestContext)) return failed(ctx);
    const args: DeviceArg[] = [];
    const buffers: GuestBo[] = [];
    for (const [i, arg] of call.args.entries()) {
      if (arg.kind === "buffer") {
        const gbo = ctx.bos.get(arg.bo);
        if (gbo === undefined) {
          return failed(fail(ErrorCode.UNKNOWN_BO, `argument ${i}: no buffer ${arg.bo}`));
        }
        buffers.push(gbo);
        args.push({ kind: "buffer", bo: gbo.bo });
      } else {
        const bad = checkScalar(arg.kind, arg.value);
        if (bad) return failed(fail(ErrorCode.BAD_KERNEL_ARGS, `argument ${i}: ${bad}`));
        args.push(arg);
      }
    }
    // Kernels may write any buffer they are given: a snapshot keeps them all.
    for (const gbo of buffers) this.beforeWrite?.(gbo, 0, gbo.bo.byteLength);
    const failure = this.device.launch(call.kernel, args);
    return failure ? failed(failure) : ok();
  }

  // ---- MMIO ----

  /** Applies a batch of stores, all or nothing: every store is checked before any is applied. */
  applyStores(session: SessionRecord, batch: StoreBatch): CallResult {
    const found = this.ownBo(session, batch.context, batch.bo);
    if ("code" in found) return failed(found);
    const { gbo } = found;
    if (!gbo.bo.mapped) return failed(fail(ErrorCode.NOT_MAPPED, `buffer ${batch.bo} not mapped`));
    const invalid = this.checkStores(batch, gbo.bo.byteLength);
    if (invalid) return failed(invalid);
    const { offsets, widths, data } = batch;
    const vram = gbo.bo.bytes;
    if (this.beforeWrite) {
      let lo = Number.POSITIVE_INFINITY;
      let hi = 0;
      for (let i = 0; i < offsets.length; i++) {
        lo = Math.min(lo, offsets[i]!);
        hi = Math.max(hi, offsets[i]! + widths[i]!);
      }
      if (hi > 0) this.beforeWrite(gbo, lo, hi);
    }
    const masks = this.trackMmio ? this.mmio.masksFor(gbo) : undefined;
    let at = 0;
    for (let i = 0; i < offsets.length; i++) {
      const offset = offsets[i]!;
      const width = widths[i]!;
      for (let k = 0; k < width; k++) vram[offset + k] = data[at + k]!;
      at += width;
      if (masks) this.mmio.mark(masks, offset, width);
    }
    return ok();
  }

  private checkStores(batch: StoreBatch, size: number): Failure | null {
    const { offsets, widths, data } = batch;
    const count = offsets.length;
    if (widths.length !== count) {
      return fail(ErrorCode.MALFORMED, `${count} offsets but ${widths.length} widths`);
    }
    if (count > this.options.maxStoresPerBatch) {
      return fail(
        ErrorCode.LIMIT_EXCEEDED,
        `${count} stores in one batch, limit ${this.options.maxStoresPerBatch}`,
      );
    }
    let bytes = 0;
    for (let i = 0; i < count; i++) {
      const offset = offsets[i]!;
      const width = widths[i]!;
      if (width !== 1 && width !== 2 && width !== 4 && width !== 8) {
        return fail(ErrorCode.BAD_STORE, `store ${i}: width ${width} is not 1, 2, 4 or 8`);
      }
      if (offset % width !== 0) {
        return fail(ErrorCode.BAD_STORE, `store ${i}: offset ${offset} not aligned to ${width}`);
      }
      if (!inRange(offset, width, size)) {
        return fail(
          ErrorCode.OUT_OF_BOUNDS,
          `store ${i}: offset ${offset} width ${width} outside ${size} bytes`,
        );
      }
      bytes += width;
    }
    if (bytes !== data.byteLength) {
      return fail(ErrorCode.MALFORMED, `stores need ${bytes} data bytes, got ${data.byteLength}`);
    }
    return null;
  }

  /** Dirty pages since the last take, with their written bytes; see MmioTracker.take. */
  takeDirtyPages(): DirtyPage[] {
    return this.mmio.take();
  }

  // ---- applying what a primary did (standby side) ----

  /**
   * Writes MMIO page batches shipped by a primary: every extent into the named buffer's page.
   * All or nothing: an unknown buffer or an extent outside its page changes nothing.
   */
  applyPageWrites(pages: readonly PageWrite[]): Failure | null {
    const targets: GuestBo[] = [];
    for (const page of pages) {
      const gbo = this.contexts.get(page.context)?.bos.get(page.bo);
      if (gbo === undefined) {
        return fail(ErrorCode.UNKNOWN_BO, `page batch names ${page.context}/${page.bo}`);
      }
      const pageStart = page.pageIndex * PAGE_SIZE_BYTES;
      for (const e of page.extents) {
        const inPage = inRange(e.offsetInPage, e.data.byteLength, PAGE_SIZE_BYTES);
        if (!inPage || !inRange(pageStart + e.offsetInPage, e.data.byteLength, gbo.bo.byteLength)) {
          return fail(
            ErrorCode.OUT_OF_BOUNDS,
            `page batch extent outside ${page.context}/${page.bo}`,
          );
        }
      }
      targets.push(gbo);
    }
    for (const [i, page] of pages.entries()) {
      const vram = targets[i]!.bo.bytes;
      const pageStart = page.pageIndex * PAGE_SIZE_BYTES;
      for (const e of page.extents) vram.set(e.data, pageStart + e.offsetInPage);
    }
    return null;
  }

  /** Records a frame the primary applied without executing it here (store frames). */
  recordFrame(record: FrameRecord): Failure | null {
    const session = this.sessions.get(record.sessionId);
    if (session === undefined) return fail(ErrorCode.UNKNOWN_SESSION, "frame of unknown session");
    if (record.frame !== session.lastFrame + 1) {
      return fail(
        ErrorCode.FRAME_OUT_OF_ORDER,
        `frame ${record.frame} recorded after ${session.lastFrame}`,
      );
    }
    session.lastFrame = record.frame;
    session.remember(
      record.frame,
      { code: record.code, message: record.message, output: NO_OUTPUT },
      this.options.session,
    );
    return null;
  }

  /** Guest handles of a context's buffers (for the handle delta of a destroy). */
  boHandlesOf(context: number): number[] {
    return [...(this.contexts.get(context)?.bos.keys() ?? [])];
  }

  // ---- lookups ----

  private ownContext(session: SessionRecord, handle: number): GuestContext | Failure {
    const ctx = this.contexts.get(handle);
    // Another session's context is exactly as unknown as one never created.
    if (ctx === undefined || ctx.sessionId !== session.id) {
      return fail(ErrorCode.UNKNOWN_CONTEXT, `no context ${handle}`);
    }
    return ctx;
  }

  private ownBo(
    session: SessionRecord,
    context: number,
    bo: number,
  ): Failure | { ctx: GuestContext; gbo: GuestBo } {
    const ctx = this.ownContext(session, context);
    if (!(ctx instanceof GuestContext)) return ctx;
    const gbo = ctx.bos.get(bo);
    if (gbo === undefined)
      return fail(ErrorCode.UNKNOWN_BO, `no buffer ${bo} in context ${context}`);
    return { ctx, gbo };
  }

  private checkDmaSize(length: number): Failure | null {
    if (length > this.options.maxDmaBytes) {
      return fail(
        ErrorCode.LIMIT_EXCEEDED,
        `DMA of ${length} bytes above the limit ${this.options.maxDmaBytes}`,
      );
    }
    return null;
  }

  private usageOf(tenant: string): TenantUsage {
    let used = this.usage.get(tenant);
    if (used === undefined) {
      used = { vramBytes: 0, bos: 0, contexts: 0 };
      this.usage.set(tenant, used);
    }
    return used;
  }

  tenantUsage(tenant: string): Readonly<TenantUsage> {
    return this.usageOf(tenant);
  }
}

function checkScalar(kind: "u32" | "i32" | "f32", value: number): string | null {
  switch (kind) {
    case "u32":
      return Number.isInteger(value) && value >= 0 && value <= 0xffffffff
        ? null
        : `u32 ${value} out of range`;
    case "i32":
      return Number.isInteger(value) && value >= -0x80000000 && value <= 0x7fffffff
        ? null
        : `i32 ${value} out of range`;
    case "f32":
      return Object.is(Math.fround(value), value) ? null : `f32 ${value} not a float32 value`;
  }
}
