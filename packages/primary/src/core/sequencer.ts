// The sequencer: applies guest frames through the backend and turns every state change, from
// every session, into log entries in one total order. Pure: the caller supplies the time and
// decides when to flush MMIO on a timer.
//
// MMIO (DESIGN §6): in `per-page` mode, store frames only dirty pages; the pages leave as one
// mmioPages entry (only the written bytes, as VRAM holds them at the cut) together with the
// records of the store frames they cover. The batch is cut before any other entry (so stores
// and calls keep their order), when flushMmio() is called (the caller's timer), and above
// flushBytes. In `per-store` mode every store is an entry of its own (the seed's baseline).
//
// Entries are appended before the device has run them (issue #14): the sequencer names each
// entry's seq to the device (beginSeq) before applying it, and what only the device can tell —
// a dmaRead's output digest, a checkpoint's state digest — is added to the log as a late
// result once the device has produced it; the sender ships it after the entry.
import {
  type Call,
  type CallResult,
  deviceFaultRecord,
  EMPTY_DELTA,
  ErrorCode,
  type FaultedFrame,
  type Frame,
  type FrameRecord,
  type HandleDelta,
  invariant,
  NO_OUTPUT,
  type PageWrite,
  type ReplicationLog,
  type SessionCloseReason,
} from "@vgpu-ha/common/core";
import {
  type Backend,
  digestWhenDone,
  type FrameOutcome,
  summarizeResult,
} from "@vgpu-ha/gpu-model";

export type MmioReplication = "per-page" | "per-store";

export interface SequencerOptions {
  readonly mmio: MmioReplication;
  /** Cut a page batch once this many store bytes are pending. */
  readonly flushBytes: number;
  /**
   * Whether the log keeps entries after the guest message that made them was served (a standby
   * reads them, or may): a dmaWrite's data is then copied out of the receive buffer, so a
   * retained entry does not pin the whole gRPC message. A standalone node drops every entry
   * once the message is served (nobody reads them), so it keeps the view. Default true.
   */
  readonly logKeepsEntries?: boolean;
}

type Session = NonNullable<ReturnType<Backend["sessions"]["get"]>>;

export interface Sequenced {
  readonly outcome: FrameOutcome;
  /**
   * The seq that must be applied by the standby before this frame's reply may be released
   * (0: nothing to wait for). For a store frame in per-page mode, the seq of the page batch
   * that will carry it (always the next entry appended).
   */
  readonly seq: number;
}

export interface MmioCounters {
  storesSeen: number;
  pageBatches: number;
  pagesShipped: number;
  bytesShipped: number;
}

export class Sequencer {
  readonly backend: Backend;
  readonly log: ReplicationLog;
  readonly options: SequencerOptions;
  private readonly clock: () => number;
  private pendingFrames: FrameRecord[] = [];
  /** Frames a failed device was running (session id → frame numbers): see faultFrames(). */
  private readonly faulted = new Map<string, Set<number>>();
  private pendingStoreBytes = 0;
  readonly mmioCounters: MmioCounters = {
    storesSeen: 0,
    pageBatches: 0,
    pagesShipped: 0,
    bytesShipped: 0,
  };

  constructor(
    backend: Backend,
    log: ReplicationLog,
    options: SequencerOptions,
    nowMs: () => number,
  ) {
    this.backend = backend;
    this.log = log;
    this.options = options;
    this.clock = nowMs;
  }

  /** Whether store frames wait for a page batch to be cut. */
  get mmioPending(): boolean {
    return this.pendingFrames.length > 0;
  }

  /**
   * Names the entry the device work submitted next belongs to: the seq the next entry gets
   * (issue #14: DeviceProgress.beginSeq), so replies wait for their own work only.
   */
  private beginEntry(): void {
    this.backend.progress.beginSeq(this.log.lastSeq + 1);
  }

  openSession(id: string, tenant: string): ReturnType<Backend["openSession"]> {
    this.flushMmio();
    this.beginEntry();
    const opened = this.backend.openSession(id, tenant);
    if ("code" in opened) return opened;
    this.append({ kind: "sessionOpen", sessionId: id, tenant });
    return opened;
  }

  /** Closes a session (the guest's Close, the idle reaper's or an operator's); its seq, or 0. */
  closeSession(id: string, reason: SessionCloseReason = "guest"): number {
    if (!this.backend.sessions.has(id)) return 0;
    this.flushMmio();
    this.beginEntry();
    this.backend.closeSession(id, reason);
    return this.append({ kind: "sessionClose", sessionId: id, reason });
  }

  /**
   * Frames whose device work was running when the previous primary's device failed (its
   * DeviceFault, kept by the standby that took over). If the guest re-sends one this node has
   * not applied, it is answered DEVICE_FAULT and not run: it might take this device down too.
   * One this node applied keeps its cached reply (the backend answers the re-send).
   */
  faultFrames(frames: readonly FaultedFrame[]): void {
    for (const f of frames) {
      const numbers = this.faulted.get(f.sessionId) ?? new Set<number>();
      numbers.add(f.frame);
      this.faulted.set(f.sessionId, numbers);
    }
  }

  applyFrame(session: Session, frame: Frame): Sequenced {
    if (this.isFaulted(session, frame)) return this.refuseFaulted(session, frame.number);
    if (frame.body.kind === "call") this.flushMmio();
    const destroyed =
      frame.body.kind === "call" && frame.body.call.op === "contextDestroy"
        ? this.backend.boHandlesOf(frame.body.call.context)
        : [];
    // Store frames in per-page mode go out in the next page batch: that entry's seq too.
    this.beginEntry();
    const outcome = this.backend.applyFrame(session, frame);
    if (outcome.kind === "rejected") return { outcome, seq: 0 };
    if (outcome.kind === "duplicate") {
      // Its entry may not be applied by the standby yet: wait for everything so far.
      return { outcome, seq: this.log.lastSeq + (this.mmioPending ? 1 : 0) };
    }
    const body = frame.body;
    if (body.kind === "call") {
      // Read data exists once the device ran the call: its digest follows the entry.
      const result = outcome.result;
      const late = result.output.kind === "data";
      const seq = this.append({
        kind: "call",
        sessionId: session.id,
        frame: frame.number,
        call: this.options.logKeepsEntries === false ? body.call : ownedCall(body.call),
        handles: handleDelta(body.call, result, destroyed),
        result: late ? { code: result.code, outputDigest: NO_DIGEST } : summarizeResult(result),
      });
      if (late) {
        this.backend.progress.afterDevice(() =>
          this.log.addLate({
            seq,
            kind: "output",
            outputDigest: summarizeResult(result).outputDigest,
          }),
        );
      }
      return { outcome, seq };
    }
    const record: FrameRecord = {
      sessionId: session.id,
      frame: frame.number,
      code: outcome.result.code,
      message: outcome.result.message,
    };
    const stores = outcome.result.code === ErrorCode.OK ? body.batch.offsets.length : 0;
    this.mmioCounters.storesSeen += stores;
    if (this.options.mmio === "per-store") {
      return { outcome, seq: this.appendStores(body.batch, stores, record) };
    }
    this.pendingFrames.push(record);
    this.pendingStoreBytes += stores === 0 ? 0 : body.batch.data.byteLength;
    const seq = this.log.lastSeq + 1;
    if (this.pendingStoreBytes >= this.options.flushBytes) this.flushMmio();
    return { outcome, seq };
  }

  private isFaulted(session: Session, frame: Frame): boolean {
    if (this.faulted.size === 0 || frame.number !== session.lastFrame + 1) return false;
    return this.faulted.get(session.id)?.has(frame.number) === true;
  }

  /**
   * Consumes a faulted frame without running it: the session records it with DEVICE_FAULT
   * (its cached reply), and so does the standby, from a page batch with no pages.
   */
  private refuseFaulted(session: Session, number: number): Sequenced {
    const numbers = this.faulted.get(session.id)!;
    numbers.delete(number);
    if (numbers.size === 0) this.faulted.delete(session.id);
    const record = deviceFaultRecord(session.id, number);
    this.flushMmio();
    const refused = this.backend.recordFrame(record); // the session's next frame: cannot fail
    invariant(refused === null, `faulted frame not recorded: ${refused?.message}`);
    const seq = this.append({ kind: "mmioPages", pages: [], frames: [record] });
    const result: CallResult = { code: record.code, message: record.message, output: NO_OUTPUT };
    return { outcome: { kind: "applied", result }, seq };
  }

  /** Cuts the pending page batch into one entry; the seq of that entry, or 0 if none. */
  flushMmio(): number {
    if (this.pendingFrames.length === 0) return 0;
    const pages: PageWrite[] = this.backend.takeDirtyPages().map((p) => ({
      context: p.context,
      bo: p.bo,
      pageIndex: p.pageIndex,
      extents: p.extents.map((e) => ({ offsetInPage: e.offsetInPage, data: e.bytes })),
    }));
    const frames = this.pendingFrames;
    this.pendingFrames = [];
    this.pendingStoreBytes = 0;
    const c = this.mmioCounters;
    c.pageBatches++;
    c.pagesShipped += pages.length;
    for (const p of pages) for (const e of p.extents) c.bytesShipped += e.data.byteLength;
    return this.append({ kind: "mmioPages", pages, frames });
  }

  /**
   * Appends a checkpoint; returns its seq. The state digest there follows as a late result once
   * the device has done everything before it; `digested` is told it too.
   */
  checkpoint(requestId: number, digested?: (digest: string) => void): number {
    this.flushMmio();
    const seq = this.append({ kind: "checkpoint", digest: "", requestId });
    digestWhenDone(this.backend, (d) => {
      this.log.addLate({ seq, kind: "state", digest: d.state });
      digested?.(d.state);
    });
    return seq;
  }

  private appendStores(
    batch: {
      context: number;
      bo: number;
      offsets: ArrayLike<number>;
      widths: Uint8Array;
      data: Uint8Array;
    },
    stores: number,
    record: FrameRecord,
  ): number {
    if (stores === 0) return this.append({ kind: "mmioPages", pages: [], frames: [record] });
    let at = 0;
    let seq = 0;
    for (let i = 0; i < stores; i++) {
      const width = batch.widths[i]!;
      seq = this.append({
        kind: "mmioStore",
        context: batch.context,
        bo: batch.bo,
        offset: batch.offsets[i]!,
        data: batch.data.slice(at, at + width),
        frames: i === stores - 1 ? [record] : [],
      });
      at += width;
      this.mmioCounters.bytesShipped += width;
    }
    return seq;
  }

  private append(body: Parameters<ReplicationLog["append"]>[0]): number {
    if (body.kind !== "mmioPages" && body.kind !== "mmioStore") this.flushMmio();
    return this.log.append(body, this.clock()).seq;
  }
}

const NO_DIGEST = new Uint8Array(0);

/** The call as the log keeps it: DMA data copied out of the receive buffer. */
function ownedCall(call: Call): Call {
  return call.op === "dmaWrite" ? { ...call, data: new Uint8Array(call.data) } : call;
}

function handleDelta(call: Call, result: CallResult, destroyedBos: readonly number[]): HandleDelta {
  if (result.code !== ErrorCode.OK) return EMPTY_DELTA;
  const out = result.output;
  switch (call.op) {
    case "contextCreate":
      return { ...EMPTY_DELTA, contextsCreated: out.kind === "handle" ? [out.handle] : [] };
    case "contextDestroy":
      return {
        ...EMPTY_DELTA,
        contextsDestroyed: [call.context],
        bosReleased: destroyedBos.map((bo) => ({ context: call.context, bo })),
      };
    case "boAlloc":
      return {
        ...EMPTY_DELTA,
        bosAssigned: out.kind === "handle" ? [{ context: call.context, bo: out.handle }] : [],
      };
    case "boFree":
      return { ...EMPTY_DELTA, bosReleased: [{ context: call.context, bo: call.bo }] };
    default:
      return EMPTY_DELTA;
  }
}
