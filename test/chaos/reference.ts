// The reference: every session's frames that the final node holds (1..lastFrame), replayed in
// order on a fresh GPU model with the nodes' own limits, knowing nothing of the daemons but
// their config. Sessions are independent except for one node-wide counter, the context handle:
// the replay interleaves sessions so that each acknowledged contextCreate gets the handle the
// guest was given (a contextCreate never acknowledged takes the next free one). Its digest is
// what the node's must be; its results are what each acknowledged frame must have returned.
import { type CallResult, ConfigSchema } from "@vgpu-ha/common";
import { Backend, type BackendOptions, computeDigest, type StateDigest } from "@vgpu-ha/gpu-model";
import { same } from "../support/guest-workload.js";
import type { FrameRecord, SessionHistory } from "./history.js";

/** The backend options a node builds from its config (packages/daemon/src/roles/backend-options.ts). */
export function backendOptionsOf(config: Record<string, unknown>): BackendOptions {
  const c = ConfigSchema.parse(config);
  return {
    device: c.device,
    tenants: new Map(
      c.tenants.map((t) => [t.name, { vramBytes: t.vramQuotaBytes, bos: t.boQuota }]),
    ),
    session: {
      replyCacheFrames: c.limits.replyCacheFrames,
      replyCacheBytes: c.limits.replyCacheBytes,
    },
    maxDmaBytes: c.limits.maxDmaBytes,
    maxStoresPerBatch: c.limits.maxStoresPerBatch,
    trackMmio: false,
  };
}

/** A session as the final node holds it: its frames 1..lastFrame, or not at all. */
export interface HeldSession {
  readonly history: SessionHistory;
  readonly tenant: string;
  /** undefined: the node does not know the session. */
  readonly lastFrame: number | undefined;
}

export interface ReferenceResult {
  readonly digest: StateDigest;
  /** Acknowledged frames whose result differs from the reference's. */
  readonly mismatches: string[];
  /** Reasons the replay could not follow the history (a broken history is a failed check). */
  readonly problems: string[];
  readonly framesReplayed: number;
}

const createsContext = (f: FrameRecord) =>
  f.body.kind === "call" && f.body.call.op === "contextCreate";

function ackedHandle(f: FrameRecord): number | undefined {
  return f.outcome === "ok" && f.result?.output.kind === "handle"
    ? f.result.output.handle
    : undefined;
}

function describeResult(r: CallResult): string {
  const o = r.output;
  const out =
    o.kind === "handle"
      ? `handle ${o.handle}`
      : o.kind === "fence"
        ? `fence ${o.value}`
        : o.kind === "data"
          ? `${o.data.byteLength} bytes`
          : "no output";
  return `code ${r.code}, ${out}`;
}

export function replayReference(
  options: BackendOptions,
  held: readonly HeldSession[],
): ReferenceResult {
  const backend = new Backend(options);
  const mismatches: string[] = [];
  const problems: string[] = [];
  const queues = held
    .filter((h) => h.lastFrame !== undefined)
    .map((h) => {
      const record = backend.openSession(h.history.id, h.tenant);
      if (!("lastFrame" in record))
        throw new Error(`reference: cannot open ${h.history.id}: ${record.message}`);
      const frames = h.history.frames.slice(0, h.lastFrame);
      if (frames.length < h.lastFrame!) {
        problems.push(
          `session ${h.history.id}: the node holds ${h.lastFrame} frames but the guest sent ${frames.length}`,
        );
      }
      return { h, record, frames, next: 0 };
    });
  let replayed = 0;
  const apply = (q: (typeof queues)[number]) => {
    const f = q.frames[q.next++]!;
    const outcome = backend.applyFrame(q.record, { number: f.number, body: f.body });
    replayed++;
    if (outcome.kind !== "applied") {
      problems.push(`session ${q.h.history.id} frame ${f.number}: reference ${outcome.kind}`);
      return;
    }
    if (f.outcome === "ok" && f.result) {
      const want = outcome.result;
      if (f.result.code !== want.code || !same(f.result.output, want.output)) {
        mismatches.push(
          `session ${q.h.history.id} frame ${f.number} (${f.kind}): acknowledged ${describeResult(f.result)}, reference ${describeResult(want)}`,
        );
      }
    }
  };
  for (;;) {
    let progressed = false;
    for (const q of queues) {
      while (q.next < q.frames.length) {
        const f = q.frames[q.next]!;
        if (createsContext(f) && ackedHandle(f) !== backend.nextContextHandle) break;
        apply(q);
        progressed = true;
      }
    }
    if (queues.every((q) => q.next >= q.frames.length)) break;
    if (progressed) continue;
    // Every session waits at a contextCreate: one never acknowledged takes the next handle.
    const unknown = queues.find(
      (q) => q.next < q.frames.length && ackedHandle(q.frames[q.next]!) === undefined,
    );
    if (unknown) {
      apply(unknown);
      continue;
    }
    const waiting = queues
      .filter((q) => q.next < q.frames.length)
      .map(
        (q) =>
          `${q.h.history.id} frame ${q.frames[q.next]!.number} wants ${ackedHandle(q.frames[q.next]!)}`,
      );
    problems.push(
      `context handles cannot be reproduced: next handle ${backend.nextContextHandle}, ${waiting.join("; ")}`,
    );
    for (const q of queues) while (q.next < q.frames.length) apply(q);
    break;
  }
  return { digest: computeDigest(backend), mismatches, problems, framesReplayed: replayed };
}
