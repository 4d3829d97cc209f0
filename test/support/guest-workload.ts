// Runs the seeded random workloads of @vgpu-ha/gpu-model/testing against a real node through
// the client library, and checks every result against a replay of the same workload on a local
// backend. A generated workload predicts handles for a fresh backend of its own; on a node
// shared with other sessions, context handles come from one node-wide counter, so the runner
// learns each real context handle from its contextCreate result (waiting for it before later
// frames name the context) and rewrites the `context` of every later frame. Buffer handles are
// per context and match. Everything else is pipelined.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { ErrorCode, errorName, Session } from "@vgpu-ha/client";
import { type CallResult, decodeFrame, encodeFrame, type FrameBody, wire } from "@vgpu-ha/common";
import { generateWorkload, replay, type WorkloadStep } from "@vgpu-ha/gpu-model/testing";

export interface GuestCredentials {
  readonly endpoint: string;
  readonly tenant: string;
  readonly token: string;
}

export interface WorkloadReport {
  readonly seed: number;
  readonly frames: number;
  /** Frames whose result differed from the local replay (empty when all matched). */
  readonly mismatches: string[];
  /** Per kind of frame sent: "stores", "fault", or the call's op. */
  readonly kinds: Map<string, number>;
}

/** Deep equality where NaN equals NaN and typed arrays compare by content. */
export function same(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (ArrayBuffer.isView(a) && ArrayBuffer.isView(b)) {
    return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(
      Buffer.from(b.buffer, b.byteOffset, b.byteLength),
    );
  }
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) =>
    same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]),
  );
}

/**
 * Whether a frame survives the wire unchanged. The generator also makes faults the wire cannot
 * carry (NaN or negative offsets, handles above 32 bits…); those are for the backend's own
 * tests and are left out here.
 */
function wireSafe(step: WorkloadStep): boolean {
  try {
    const bytes = toBinary(wire.FrameSchema, encodeFrame(step.frame));
    const back = decodeFrame(fromBinary(wire.FrameSchema, bytes));
    return !(back instanceof Error) && same(back.body, step.frame.body);
  } catch {
    return false;
  }
}

/**
 * The steps of a one-session workload of `frames` frames that the wire can carry, numbered
 * again from 1. Leaving out a fault changes nothing else: faults never change state.
 */
export function wireWorkload(seed: number, frames: number) {
  const generated = generateWorkload(seed, { frames, sessions: 1, resendPercent: 0 });
  const steps = generated.steps
    .filter(wireSafe)
    .map((s, i) => ({ ...s, frame: { ...s.frame, number: i + 1 } }));
  return { ...generated, steps };
}

/** Context handles unknown to the prediction move far above any real one (still u32). */
const UNKNOWN_SHIFT = 2 ** 30;

export function translate(body: FrameBody, contexts: ReadonlyMap<number, number>): FrameBody {
  const real = (predicted: number) =>
    contexts.get(predicted) ??
    (predicted > 0 && predicted < UNKNOWN_SHIFT ? predicted + UNKNOWN_SHIFT : predicted);
  if (body.kind === "stores") {
    return { kind: "stores", batch: { ...body.batch, context: real(body.batch.context) } };
  }
  const call = body.call;
  return call.op === "contextCreate"
    ? body
    : { kind: "call", call: { ...call, context: real(call.context) } };
}

function kindOf(step: WorkloadStep): string {
  if (step.expect.code !== ErrorCode.OK) return "fault";
  return step.frame.body.kind === "stores" ? "stores" : step.frame.body.call.op;
}

export interface RunOptions {
  /** Checked before each frame: true ends the run early (without error). */
  readonly stop?: () => boolean;
  /** Called as each result arrives. */
  readonly onResult?: () => void;
  /** Awaited before each frame is sent (pacing). */
  readonly beforeFrame?: () => Promise<void>;
}

/**
 * Sends the workload of `seed` through `session` (a fresh session: its frames start at 1) and
 * compares every result with a local replay. Rejects if the session fails.
 */
export async function runWorkload(
  session: Session,
  seed: number,
  frames: number,
  options: RunOptions = {},
): Promise<WorkloadReport> {
  const workload = wireWorkload(seed, frames);
  const expected = replay(workload, 1).outcomes;
  const contexts = new Map<number, number>();
  const mismatches: string[] = [];
  const kinds = new Map<string, number>();
  const checks: Promise<void>[] = [];
  let sent = 0;
  const check = (i: number, step: WorkloadStep, got: CallResult) => {
    const want = expected[i]!.result;
    const where = `seed ${seed} frame ${step.frame.number} (${step.expect.action})`;
    if (got.code !== want.code) {
      mismatches.push(
        `${where}: ${errorName(got.code)} (${got.message}), want ${errorName(want.code)}`,
      );
      return;
    }
    if (step.frame.body.kind === "call" && step.frame.body.call.op === "contextCreate") {
      if (got.output.kind === "handle" && want.output.kind === "handle") {
        contexts.set(want.output.handle, got.output.handle);
        return;
      }
    }
    if (!same(got.output, want.output)) mismatches.push(`${where}: output differs`);
  };
  for (const [i, step] of workload.steps.entries()) {
    await options.beforeFrame?.();
    if (options.stop?.()) break;
    const body = translate(step.frame.body, contexts);
    const result = body.kind === "call" ? session.call(body.call) : session.storeBatch(body.batch);
    const checked = result.then((r) => {
      options.onResult?.();
      check(i, step, r);
    });
    // If the session fails, the first failure is reported once (by the await or the all below).
    checked.catch(() => undefined);
    sent++;
    kinds.set(kindOf(step), (kinds.get(kindOf(step)) ?? 0) + 1);
    // Later frames may name the new context: learn its real handle first.
    if (body.kind === "call" && body.call.op === "contextCreate") await checked;
    else checks.push(checked);
  }
  await Promise.all(checks);
  return { seed, frames: sent, mismatches, kinds };
}

/** Opens a session and runs one workload in it; the session stays open (its state counts). */
export async function openAndRun(
  guest: GuestCredentials,
  seed: number,
  frames: number,
): Promise<{ session: Session; report: WorkloadReport }> {
  const session = await Session.open(guest);
  return { session, report: await runWorkload(session, seed, frames) };
}

/** A shared budget of `perSecond` frames a second, spent in order by whoever awaits it. */
export function pacer(perSecond: number): () => Promise<void> {
  let next = performance.now();
  return async () => {
    const now = performance.now();
    next = Math.max(next + 1000 / perSecond, now - 100); // never bank more than 100 ms
    if (next - now > 1) await new Promise((resolve) => setTimeout(resolve, next - now));
  };
}

/**
 * Background guest load: `sessions` loops, each running workload after workload (a new
 * session for each; every other one is closed after its run, the rest stay open) until stop(),
 * at most `framesPerSecond` frames a second in all: a light, steady load, not a flood.
 */
export class GuestLoad {
  private stopping = false;
  private readonly pace: () => Promise<void>;
  private readonly loops: Promise<void>[] = [];
  private readonly open: Session[] = [];
  readonly reports: WorkloadReport[] = [];
  /** Frames answered so far. */
  framesDone = 0;
  private firstError: Error | undefined;

  constructor(
    private readonly guest: GuestCredentials,
    private readonly options: {
      sessions: number;
      frames: number;
      seed: number;
      framesPerSecond: number;
    },
  ) {
    this.pace = pacer(options.framesPerSecond);
  }

  start(): this {
    for (let i = 0; i < this.options.sessions; i++) this.loops.push(this.loop(i));
    return this;
  }

  private async loop(index: number): Promise<void> {
    for (let round = 0; !this.stopping; round++) {
      const seed = this.options.seed + round * 1000 + index;
      let session: Session | undefined;
      try {
        session = await Session.open(this.guest);
        const report = await runWorkload(session, seed, this.options.frames, {
          stop: () => this.stopping,
          onResult: () => this.framesDone++,
          beforeFrame: this.pace,
        });
        this.reports.push(report);
        if (round % 2 === 0) await session.close();
        else this.open.push(session);
      } catch (e) {
        this.firstError ??= e as Error;
        await session?.close().catch(() => undefined);
        return;
      }
    }
  }

  /** Stops after the workloads in progress reach a frame boundary; throws the first error. */
  async stop(): Promise<{ workloads: number; frames: number; mismatches: string[] }> {
    this.stopping = true;
    await Promise.all(this.loops);
    if (this.firstError) throw this.firstError;
    return {
      workloads: this.reports.length,
      frames: this.framesDone,
      mismatches: this.reports.flatMap((r) => r.mismatches),
    };
  }

  /** Closes the sessions left open (after the last verify). */
  async close(): Promise<void> {
    await Promise.all(this.open.splice(0).map((s) => s.close()));
  }
}
