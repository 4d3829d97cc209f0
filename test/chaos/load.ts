// The guest load: `sessions` slots, each keeping one session (through the client library, with
// both nodes' endpoints, so it fails over) busy with a seeded random workload of every call kind
// and MMIO store batches, with an increment of the session's own counter (a non-idempotent
// kernel) every few frames and a gemm_f32 of about 20 ms with a readback every 40 (heavy.ts).
// Every frame is recorded with its outcome (history.ts). A session
// that fails (it can, after a split brain or an async failover) is recorded and replaced by a
// new one. Frames are paced: a steady load, not a flood, on a 2-core machine.
import { ErrorCode, Session, SessionClosedError, VgpuError } from "@vgpu-ha/client";
import type { Call, CallResult, FrameBody, StoreBatch } from "@vgpu-ha/common";
import type { WorkloadStep } from "@vgpu-ha/gpu-model/testing";
import { pacer, translate, wireWorkload } from "../support/guest-workload.js";
import {
  GEMM_SIDE_DEFAULT,
  gemmFrame,
  HEAVY_EVERY,
  type HeavyBuffers,
  matrixBytes,
  readbackFrame,
  seededMatrix,
} from "./heavy.js";
import type { Ack, FrameRecord, SessionHistory } from "./history.js";

/** An increment of the counter every this many workload frames. */
const INCREMENT_EVERY = 4;
/**
 * A session's workload comes in segments of this many frames, each a fresh seeded workload
 * whose contexts are destroyed at its end. Generating one takes tens of milliseconds; one for a
 * whole long run would block the harness (its link proxies, its clocks) for a second.
 */
const SEGMENT_FRAMES = 1500;

const segmentSeed = (sessionSeed: number, segment: number) =>
  (sessionSeed + segment * 15_485_863) >>> 0;

function segmentSteps(sessionSeed: number, segment: number): WorkloadStep[] {
  return wireWorkload(segmentSeed(sessionSeed, segment), SEGMENT_FRAMES).steps.filter(
    clientAccepts,
  );
}

export interface LoadOptions {
  readonly endpoints: readonly string[];
  readonly tenant: string;
  readonly token: string;
  readonly sessions: number;
  /** Frames a second, all sessions together. */
  readonly rate: number;
  readonly seed: number;
  /** Side of the ~20 ms gemm_f32 launches in the mix (heavy.ts); 0: none. Default 224. */
  readonly gemmSide?: number;
  /** The run's clock (ms). */
  readonly now: () => number;
}

// The client refuses, before numbering it, a frame whose values do not fit their fields
// (packages/client/src/validate.ts, not exported). The history must know each frame's number,
// so frames the client would refuse are left out, with the same rules.
const u32 = (v: number) => Number.isInteger(v) && v >= 0 && v <= 0xffffffff;
const i32 = (v: number) => Number.isInteger(v) && v >= -0x80000000 && v <= 0x7fffffff;
const u64 = (v: number) => Number.isSafeInteger(v) && v >= 0;

function callFits(call: Call): boolean {
  const c = call as unknown as Record<string, unknown>;
  const checks: [string, (v: number) => boolean][] = [
    ["context", u32],
    ["bo", u32],
    ["srcBo", u32],
    ["dstBo", u32],
    ["sizeBytes", u64],
    ["offset", u64],
    ["length", u64],
    ["srcOffset", u64],
    ["dstOffset", u64],
  ];
  for (const [field, fits] of checks) {
    if (field in c && !fits(c[field] as number)) return false;
  }
  if (call.op === "kernelLaunch") {
    return call.args.every((a) =>
      a.kind === "buffer"
        ? u32(a.bo)
        : a.kind === "i32"
          ? i32(a.value)
          : a.kind === "f32" || u32(a.value),
    );
  }
  return true;
}

function storesFit(batch: StoreBatch): boolean {
  return u32(batch.context) && u32(batch.bo) && Array.from(batch.offsets).every(u32);
}

export function clientAccepts(step: WorkloadStep): boolean {
  const body = step.frame.body;
  return body.kind === "call" ? callFits(body.call) : storesFit(body.batch);
}

function kindOf(body: FrameBody): string {
  return body.kind === "stores" ? "stores" : body.call.op;
}

/** A session in progress: its history, and what the loop needs to drive it. */
interface LiveSession {
  readonly session: Session;
  readonly history: SessionHistory;
  readonly pending: Promise<void>[];
  /** The session's gemm matrices, once set up (none when the mix has no heavy kernels). */
  heavy?: HeavyBuffers;
  /** Heavy launches sent so far. */
  heavyLaunches: number;
}

export class GuestLoad {
  readonly sessions: SessionHistory[] = [];
  readonly acks: Ack[] = [];
  /** Harness errors that make the history unusable (never expected). */
  readonly internalErrors: string[] = [];
  /** Session.open attempts that failed (such an open may still have reached a node). */
  readonly openFailures: { atMs: number; slot: number; message: string }[] = [];
  private readonly live = new Map<number, LiveSession>();
  private readonly loops: Promise<void>[] = [];
  private stopping = false;
  /** The first segment of each slot's first session, made before the load starts. */
  private readonly firstSegments = new Map<number, WorkloadStep[]>();

  constructor(private readonly options: LoadOptions) {
    for (let slot = 0; slot < options.sessions; slot++) {
      this.firstSegments.set(slot, segmentSteps(this.sessionSeed(slot, 0), 0));
    }
  }

  private sessionSeed(slot: number, generation: number): number {
    return (this.options.seed + slot * 7919 + generation * 104_729) >>> 0;
  }

  start(): this {
    for (let slot = 0; slot < this.options.sessions; slot++) this.loops.push(this.loop(slot));
    return this;
  }

  /** Acknowledgements so far. */
  get acked(): number {
    return this.acks.length;
  }

  private async loop(slot: number): Promise<void> {
    const pace = pacer(this.options.rate / this.options.sessions);
    for (let generation = 0; !this.stopping; ) {
      let session: Session;
      try {
        session = await Session.open({
          endpoints: [...this.options.endpoints],
          tenant: this.options.tenant,
          token: this.options.token,
          failoverTimeoutMs: 30_000,
        });
      } catch (e) {
        this.openFailures.push({ atMs: this.options.now(), slot, message: (e as Error).message });
        await new Promise((r) => setTimeout(r, 250));
        continue;
      }
      const seed = this.sessionSeed(slot, generation);
      const history: SessionHistory = {
        slot,
        generation,
        id: session.id,
        seed,
        openedMs: this.options.now(),
        openedOn: { nodeId: session.nodeId, epoch: session.epoch },
        frames: [],
      };
      this.sessions.push(history);
      const live: LiveSession = { session, history, pending: [], heavyLaunches: 0 };
      this.live.set(slot, live);
      generation++;
      try {
        await this.drive(live, pace);
      } catch (e) {
        this.internalErrors.push(`slot ${slot}: ${(e as Error).stack ?? e}`);
        return;
      }
      if (history.failure === undefined) return; // stopping, session healthy
      this.live.delete(slot);
    }
  }

  /** Sends a frame and records it; the returned promise settles with the record. */
  private send(live: LiveSession, body: FrameBody, kind: string): Promise<FrameRecord> {
    const { session, history } = live;
    const record: FrameRecord = {
      number: history.frames.length + 1,
      body,
      kind,
      invokedMs: this.options.now(),
      outcome: "pending",
    };
    history.frames.push(record);
    const sent: Promise<CallResult> =
      body.kind === "call" ? session.call(body.call) : session.storeBatch(body.batch);
    const done = sent.then(
      (result) => {
        record.outcome = "ok";
        record.result = result;
        record.settledMs = this.options.now();
        record.nodeId = session.nodeId;
        record.epoch = session.epoch;
        this.acks.push({
          atMs: record.settledMs,
          slot: history.slot,
          nodeId: session.nodeId,
          epoch: session.epoch,
        });
        return record;
      },
      (e: unknown) => {
        record.settledMs = this.options.now();
        record.error = (e as Error).message;
        if (e instanceof SessionClosedError) {
          // The session resumed on a node at an earlier frame: this one is not there.
          record.outcome = e.code === ErrorCode.FRAME_OUT_OF_ORDER ? "error" : "unknown";
          if (history.failure === undefined) {
            history.failure = { atMs: record.settledMs, code: e.code, message: e.message };
            const lost = /: (\d+) lost/.exec(e.message);
            if (lost) history.reportedLost = Number(lost[1]);
          }
        } else {
          record.outcome = "error";
          const why = e instanceof VgpuError ? "refused by the client" : "failed";
          this.internalErrors.push(
            `session ${history.id} frame ${record.number} ${why}: ${record.error} (frame numbers lost)`,
          );
        }
        return record;
      },
    );
    live.pending.push(done.then(() => undefined));
    return done;
  }

  private async drive(live: LiveSession, pace: () => Promise<void>): Promise<void> {
    const { history } = live;
    const ok = (r: FrameRecord) => r.outcome === "ok" && r.result?.code === ErrorCode.OK;
    const ctx = await this.send(live, { kind: "call", call: { op: "contextCreate" } }, "setup");
    if (!ok(ctx) || ctx.result?.output.kind !== "handle") return;
    const context = ctx.result.output.handle;
    const bo = await this.send(
      live,
      { kind: "call", call: { op: "boAlloc", context, sizeBytes: 4096 } },
      "setup",
    );
    if (!ok(bo) || bo.result?.output.kind !== "handle") return;
    history.counter = { context, bo: bo.result.output.handle };
    const side = this.options.gemmSide ?? GEMM_SIDE_DEFAULT;
    if (side > 0 && !(await this.setUpHeavy(live, context, side))) return;
    const increment: FrameBody = {
      kind: "call",
      call: {
        op: "kernelLaunch",
        context,
        kernel: "increment_u32",
        args: [
          { kind: "buffer", bo: history.counter.bo },
          { kind: "u32", value: 1 },
          { kind: "u32", value: 1 },
        ],
      },
    };
    for (let segment = 0; !this.stopping && !history.failure; segment++) {
      const first = history.generation === 0 && segment === 0;
      const steps =
        (first ? this.firstSegments.get(history.slot) : undefined) ??
        segmentSteps(history.seed, segment);
      const contexts = await this.runSegment(live, pace, steps, increment);
      // The segment's contexts go, so that state stays bounded over a long run.
      for (const context of new Set(contexts.values())) {
        await pace();
        if (this.stopping || history.failure) return;
        void this.send(
          live,
          { kind: "call", call: { op: "contextDestroy", context } },
          "contextDestroy",
        );
      }
    }
  }

  /** Allocates the session's gemm matrices and writes Y and Z; false if a step failed. */
  private async setUpHeavy(live: LiveSession, context: number, side: number): Promise<boolean> {
    const ok = (r: FrameRecord) => r.outcome === "ok" && r.result?.code === ErrorCode.OK;
    const handles: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await this.send(
        live,
        { kind: "call", call: { op: "boAlloc", context, sizeBytes: matrixBytes(side) } },
        "setup",
      );
      if (!ok(r) || r.result?.output.kind !== "handle") return false;
      handles.push(r.result.output.handle);
    }
    const [x, y, z] = handles as [number, number, number];
    for (const [bo, salt] of [
      [y, 1],
      [z, 2],
    ] as const) {
      const data = seededMatrix(live.history.seed * 3 + salt, side);
      const r = await this.send(
        live,
        { kind: "call", call: { op: "dmaWrite", context, bo, offset: 0, data } },
        "setup",
      );
      if (!ok(r)) return false;
    }
    live.heavy = { context, x, y, z, side };
    return true;
  }

  /** Sends one segment's frames (with increments); its context handles, predicted → real. */
  private async runSegment(
    live: LiveSession,
    pace: () => Promise<void>,
    steps: readonly WorkloadStep[],
    increment: FrameBody,
  ): Promise<Map<number, number>> {
    const { history } = live;
    const contexts = new Map<number, number>();
    for (const [i, step] of steps.entries()) {
      await pace();
      if (this.stopping || history.failure) break;
      if (i % INCREMENT_EVERY === 0) void this.send(live, increment, "increment");
      if (live.heavy && i % HEAVY_EVERY === HEAVY_EVERY / 2) {
        const n = live.heavyLaunches++;
        void this.send(live, gemmFrame(live.heavy, n), "gemm");
        void this.send(live, readbackFrame(live.heavy, n), "gemm-read");
      }
      const body = translate(step.frame.body, contexts);
      const sent = this.send(live, body, kindOf(body));
      // Later frames may name the new context: learn its real handle first.
      if (body.kind === "call" && body.call.op === "contextCreate") {
        const r = await sent;
        if (r.result?.output.kind === "handle" && step.expect.handle !== undefined) {
          contexts.set(step.expect.handle, r.result.output.handle);
        }
      }
    }
    return contexts;
  }

  /** Stops sending; resolves when every frame sent has settled (or timeoutMs passed). */
  async stop(timeoutMs: number): Promise<{ settled: boolean }> {
    this.stopping = true;
    await Promise.all(this.loops);
    const all = Promise.all([...this.live.values()].flatMap((l) => l.pending));
    const settled = await Promise.race([
      all.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), timeoutMs)),
    ]);
    return { settled };
  }

  /** Each live session reads its counter back (one more acknowledged frame). */
  async readCounters(): Promise<void> {
    await Promise.all(
      [...this.live.values()].map(async (live) => {
        const { history } = live;
        if (history.failure || !history.counter) return;
        const { context, bo } = history.counter;
        const r = await this.send(
          live,
          { kind: "call", call: { op: "dmaRead", context, bo, offset: 0, length: 4 } },
          "read",
        );
        if (r.result?.code === ErrorCode.OK && r.result.output.kind === "data") {
          const d = r.result.output.data;
          history.counterRead = Buffer.from(d.buffer, d.byteOffset, d.byteLength).readUInt32LE(0);
        }
      }),
    );
  }
}
