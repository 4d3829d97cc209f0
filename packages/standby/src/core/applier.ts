// Applies log entries to the standby's backend, strictly as the primary did: calls are
// executed again (guest handles translate to this node's own device handles through its
// tables) and their results compared with the primary's summary; MMIO page batches are
// written; store frames recorded. Any mismatch is divergence. Pure.
//
// What needs the device is not compared here (the device may not have run the entry yet): a
// call whose output is data (a dmaRead) is checked by its code, and its output digest later;
// a checkpoint's digest is taken after the device. `late` says what the receiver must await.
import { type CallResult, type Entry, ErrorCode } from "@vgpu-ha/common/core";
import { type Backend, sameSummary, summarizeResult } from "@vgpu-ha/gpu-model";

/** A result the device produces later: compared once both nodes' devices ran the entry. */
export type LateApply =
  | {
      readonly kind: "output";
      readonly result: CallResult;
      /** The primary's digest when the entry carried it (empty: it follows as a late result). */
      readonly theirs: Uint8Array;
    }
  /** `digest`: the primary's, when the entry carried it (else it follows as a late result). */
  | { readonly kind: "checkpoint"; readonly requestId: number; readonly digest: string };

export type ApplyResult =
  | { readonly ok: true; readonly late?: LateApply }
  | { readonly ok: false; readonly divergence: string };

const diverged = (divergence: string): ApplyResult => ({ ok: false, divergence });
const OK: ApplyResult = { ok: true };

export function applyEntry(backend: Backend, entry: Entry): ApplyResult {
  const body = entry.body;
  switch (body.kind) {
    case "call": {
      const session = backend.sessions.get(body.sessionId);
      if (session === undefined) return diverged(`call ${body.call.op}: unknown session`);
      const outcome = backend.applyFrame(session, {
        number: body.frame,
        body: { kind: "call", call: body.call },
      });
      if (outcome.kind !== "applied") {
        return diverged(`call ${body.call.op} frame ${body.frame}: ${outcome.kind} here`);
      }
      // Read data is known after the device: its digest follows (unless the entry has it).
      if (outcome.result.output.kind === "data" && outcome.result.code === body.result.code) {
        const theirs = body.result.outputDigest;
        return { ok: true, late: { kind: "output", result: outcome.result, theirs } };
      }
      const mine = summarizeResult(outcome.result);
      if (!sameSummary(mine, body.result)) {
        return diverged(
          `call ${body.call.op} frame ${body.frame}: result ${ErrorCode[mine.code]} differs from primary's ${ErrorCode[body.result.code]} or its output does`,
        );
      }
      return OK;
    }
    case "mmioPages": {
      const failure = backend.applyPageWrites(body.pages);
      if (failure) return diverged(`page batch: ${failure.message}`);
      return recordFrames(backend, body.frames);
    }
    case "mmioStore": {
      const pageIndex = Math.floor(body.offset / 4096);
      const failure = backend.applyPageWrites([
        {
          context: body.context,
          bo: body.bo,
          pageIndex,
          extents: [{ offsetInPage: body.offset - pageIndex * 4096, data: body.data }],
        },
      ]);
      if (failure) return diverged(`store: ${failure.message}`);
      return recordFrames(backend, body.frames);
    }
    case "sessionOpen": {
      if (backend.sessions.has(body.sessionId)) return diverged("session opened twice");
      const opened = backend.openSession(body.sessionId, body.tenant);
      return "code" in opened ? diverged(`session open: ${opened.message}`) : OK;
    }
    case "sessionClose":
      if (!backend.sessions.has(body.sessionId)) return diverged("close of unknown session");
      backend.closeSession(body.sessionId, body.reason);
      return OK;
    case "checkpoint":
      return {
        ok: true,
        late: { kind: "checkpoint", requestId: body.requestId, digest: body.digest },
      };
  }
}

function recordFrames(
  backend: Backend,
  frames: Extract<Entry["body"], { frames: unknown }>["frames"],
): ApplyResult {
  for (const f of frames) {
    const failure = backend.recordFrame(f);
    if (failure) return diverged(`store frame ${f.frame}: ${failure.message}`);
  }
  return OK;
}
