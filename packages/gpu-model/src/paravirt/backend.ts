// The paravirtual backend: the system-call layer in front of the device. It validates every
// call, owns the guest-handle tables (guest handles are assigned here from counters that never
// reuse a value, and map to the device's own handles), tenants and their quotas, the session
// table with frame ordering and cached replies, and the MMIO trap. Both roles drive it the same
// way; a failing call changes no GPU state. Its parts: guest-context.ts (the handle tables'
// entries), tenant-usage.ts (quotas), call-checks.ts (argument checks), replica-writes.ts
// (what a standby applies without executing), session-table.ts and mmio-tracker.ts.
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
import { Device, type DeviceArg, type DeviceOptions } from "../device/device.js";
import type { ExecutorFactory } from "../device/executor.js";
import { type Failure, fail, inRange } from "../device/failure.js";
import type { DeviceProgress } from "../device/progress.js";
import { checkDmaSize, checkScalar, checkStores } from "./call-checks.js";
import { EndedSessions } from "./ended-sessions.js";
import { type GuestBo, GuestContext } from "./guest-context.js";
import { type DirtyPage, MmioTracker } from "./mmio-tracker.js";
import { applyPageWrites, recordFrame } from "./replica-writes.js";
import { type SessionLimits, SessionRecord } from "./session-table.js";
import {
  boQuotaFailure,
  contextQuotaFailure,
  type TenantQuota,
  type TenantUsage,
  TenantUsages,
} from "./tenant-usage.js";

export { type GuestBo, GuestContext } from "./guest-context.js";
export type { TenantQuota } from "./tenant-usage.js";

export interface BackendOptions {
  readonly device: DeviceOptions;
  readonly tenants: ReadonlyMap<string, TenantQuota>;
  readonly session: SessionLimits;
  /** Largest DMA read or write of one call. */
  readonly maxDmaBytes: number;
  readonly maxStoresPerBatch: number;
  /** Record dirty pages for replication; a standalone node may switch it off. */
  readonly trackMmio: boolean;
  /** Where the device runs (device/executor.ts); absent: inline, on the caller's thread. */
  readonly executor?: ExecutorFactory;
}

export type FrameOutcome =
  /** The frame was the session's next and was executed (its result may be an error). */
  | { readonly kind: "applied"; readonly result: CallResult }
  /** A re-send of a frame already applied: its cached reply; nothing executed again. */
  | { readonly kind: "duplicate"; readonly result: CallResult }
  /** Not applied at all (out of order, or repeated with no cached reply); nothing changed. */
  | { readonly kind: "rejected"; readonly result: CallResult };

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
  /** Where the device's work stands (see device/progress.ts). */
  readonly progress: DeviceProgress;
  readonly mmio = new MmioTracker();
  readonly contexts = new Map<number, GuestContext>();
  readonly sessions = new Map<string, SessionRecord>();
  /** Sessions closed by the idle reaper or an operator, for SESSION_EXPIRED on a resume. */
  readonly ended = new EndedSessions();
  private readonly usage = new TenantUsages();
  nextContextHandle = 1;
  /** Record dirty pages for replication (a primary in per-page mode); starts from options. */
  trackMmio: boolean;
  /**
   * The history this state belongs to (common's core/lineage.ts): set by the primary that
   * starts one, or by the standby that installs a snapshot of it; "" unknown. Not part of the
   * digest: it names the history, it is not state a guest can see.
   */
  lineage = "";
  /**
   * Called before any guest-visible byte of a buffer changes, with the byte range about to
   * change. A snapshot in progress uses it to keep pages it has not sent yet (copy-on-write).
   */
  beforeWrite: ((gbo: GuestBo, start: number, end: number) => void) | undefined;

  constructor(options: BackendOptions) {
    this.options = options;
    this.device = new Device(options.device, options.executor?.());
    this.progress = this.device.queue;
    this.trackMmio = options.trackMmio;
  }

  /** Ends the device (a device thread stops); the backend is not used after this. */
  close(): void {
    this.device.close();
  }

  /**
   * A backend holding a snapshot's metadata: contexts and buffers (zero-filled, on this
   * node's own device), sessions with their replies, and the counters. The buffers' pages are
   * touched ahead of the snapshot's writes where the device can (Device.prefault).
   */
  static restore(options: BackendOptions, meta: SnapshotMeta): Backend | Failure {
    const backend = new Backend(options);
    const restored: BufferObject[] = [];
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
      const used = backend.usage.of(c.tenant);
      used.contexts++;
      for (const b of c.bos) {
        const bo = backend.device.allocBo(ctx.device, b.sizeBytes);
        if ("code" in bo) return bo;
        bo.mapped = b.mapped;
        ctx.bos.set(b.handle, { context: c.handle, handle: b.handle, bo });
        used.bos++;
        used.vramBytes += bo.byteLength;
        restored.push(bo);
      }
    }
    backend.device.prefault(restored);
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
        // The device runs the context's calls in order; the reply leaves once they completed.
        ctx.fenceValue++;
        return ok({ kind: "fence", value: ctx.fenceValue });
      }
    }
  }

  private createContext(session: SessionRecord): CallResult {
    const used = this.usage.of(session.tenant);
    const overQuota = contextQuotaFailure(used, this.options.tenants.get(session.tenant));
    if (overQuota) return failed(overQuota);
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
    this.usage.of(ctx.tenant).contexts--;
    this.sessions.get(ctx.sessionId)?.contexts.delete(ctx.handle);
  }

  private allocBo(session: SessionRecord, context: number, sizeBytes: number): CallResult {
    const ctx = this.ownContext(session, context);
    if (!(ctx instanceof GuestContext)) return failed(ctx);
    const size = this.device.checkAllocSize(sizeBytes);
    if (typeof size !== "number") return failed(size);
    const used = this.usage.of(ctx.tenant);
    const overQuota = boQuotaFailure(used, this.options.tenants.get(ctx.tenant)!, size);
    if (overQuota) return failed(overQuota);
    const bo = this.device.allocBo(ctx.device, size);
    if ("code" in bo) return failed(bo);
    const handle = ctx.nextBoHandle++;
    ctx.bos.set(handle, { context: ctx.handle, handle, bo });
    used.bos++;
    used.vramBytes += bo.byteLength;
    return ok({ kind: "handle", handle });
  }

  private freeBo(ctx: GuestContext, gbo: GuestBo): void {
    this.mmio.forget(gbo);
    ctx.bos.delete(gbo.handle);
    this.device.freeBo(ctx.device, gbo.bo.id);
    const used = this.usage.of(ctx.tenant);
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
    const tooBig = checkDmaSize(call.data.byteLength, this.options.maxDmaBytes);
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
    const tooBig = checkDmaSize(call.length, this.options.maxDmaBytes);
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
    const invalid = checkStores(batch, gbo.bo.byteLength, this.options.maxStoresPerBatch);
    if (invalid) return failed(invalid);
    const { offsets, widths, data } = batch;
    if (this.beforeWrite) {
      let lo = Number.POSITIVE_INFINITY;
      let hi = 0;
      for (let i = 0; i < offsets.length; i++) {
        lo = Math.min(lo, offsets[i]!);
        hi = Math.max(hi, offsets[i]! + widths[i]!);
      }
      if (hi > 0) this.beforeWrite(gbo, lo, hi);
    }
    this.device.stores(gbo.bo, batch);
    if (this.trackMmio) {
      // The page batches carry the stores' own bytes (never read back from VRAM).
      const pages = this.mmio.pagesFor(gbo);
      let at = 0;
      for (let i = 0; i < offsets.length; i++) {
        const width = widths[i]!;
        this.mmio.mark(pages, offsets[i]!, width, data, at);
        at += width;
      }
    }
    return ok();
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
    return applyPageWrites(this.device, this.contexts, pages);
  }

  /** Records a frame the primary applied without executing it here (store frames). */
  recordFrame(record: FrameRecord): Failure | null {
    return recordFrame(this.sessions, record, this.options.session);
  }

  /**
   * Flips every bit of a buffer's first byte on this node only (the operator's divergence
   * drill: the next digest check must catch it). False when there is no such buffer.
   */
  corruptByte(context: number, bo: number): boolean {
    const gbo = this.contexts.get(context)?.bos.get(bo);
    if (gbo === undefined) return false;
    this.device.xorByte(gbo.bo, 0, 0xff);
    return true;
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

  tenantUsage(tenant: string): Readonly<TenantUsage> {
    return this.usage.of(tenant);
  }
}
