// Proves the workload generator is fit for the property tests: deterministic per seed, prefix-
// stable, covering every call kind, kernel, store width and fault, mostly valid — and that its
// model of the backend predicts every outcome, code and new guest handle the real backend gives.
import { CALL_OPS, ErrorCode } from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { KERNELS } from "../device/kernels/index.js";
import {
  generateWorkload,
  replay,
  WORKLOAD_KERNELS,
  WORKLOAD_LIMITS,
  type Workload,
  workloadArb,
} from "./random-workload.js";

const SEEDS = [1, 2, 3, 4, 5, 6];
const workloads = SEEDS.map((seed) => generateWorkload(seed, { frames: 400, sessions: 3 }));

describe("generateWorkload", () => {
  it("is a pure function of seed and options", () => {
    expect(generateWorkload(42, { frames: 200 })).toEqual(generateWorkload(42, { frames: 200 }));
    expect(generateWorkload(42, { frames: 200 })).not.toEqual(
      generateWorkload(43, { frames: 200 }),
    );
  });

  it("gives a prefix of the longer workload for fewer frames (shrinking shortens)", () => {
    const long = generateWorkload(7, { frames: 300 });
    const short = generateWorkload(7, { frames: 120 });
    expect(short.steps).toEqual(long.steps.slice(0, 120));
  });

  it("launches exactly the device's kernel library", () => {
    expect([...WORKLOAD_KERNELS].sort()).toEqual([...KERNELS.keys()].sort());
  });

  it("covers every call kind, every kernel, every store width, faults and re-sends", () => {
    const ops = new Set<string>();
    const kernels = new Set<string>();
    const widths = new Set<number>();
    const faultCodes = new Set<ErrorCode>();
    const actions = new Set<string>();
    for (const step of workloads.flatMap((w) => w.steps)) {
      actions.add(step.expect.action);
      if (step.expect.code !== ErrorCode.OK) faultCodes.add(step.expect.code);
      const { body } = step.frame;
      if (body.kind === "stores") {
        for (const w of body.batch.widths) widths.add(w);
        continue;
      }
      ops.add(body.call.op);
      if (body.call.op === "kernelLaunch" && step.expect.code === ErrorCode.OK) {
        kernels.add(body.call.kernel);
      }
    }
    expect([...ops].sort()).toEqual([...CALL_OPS].sort());
    expect([...kernels].sort()).toEqual([...WORKLOAD_KERNELS].sort());
    for (const w of [1, 2, 4, 8]) expect(widths).toContain(w);
    expect(actions).toContain("stores");
    expect(actions).toContain("resend");
    for (const code of [
      ErrorCode.UNKNOWN_CONTEXT,
      ErrorCode.UNKNOWN_BO,
      ErrorCode.OUT_OF_BOUNDS,
      ErrorCode.INVALID_SIZE,
      ErrorCode.UNKNOWN_KERNEL,
      ErrorCode.BAD_KERNEL_ARGS,
      ErrorCode.NOT_MAPPED,
      ErrorCode.ALREADY_MAPPED,
      ErrorCode.BAD_STORE,
      ErrorCode.LIMIT_EXCEEDED,
      ErrorCode.MALFORMED,
    ]) {
      expect(faultCodes, `fault code ${code}`).toContain(code);
    }
  });

  it("is mostly valid, keeps buffers within 64 KiB and frames in order per session", () => {
    for (const w of workloads) {
      const valid = w.steps.filter((s) => s.expect.code === ErrorCode.OK).length;
      expect(valid / w.steps.length).toBeGreaterThan(0.75);
      const last = new Map<string, number>();
      for (const { session, frame, expect: e } of w.steps) {
        if (e.outcome === "duplicate") {
          expect(frame.number).toBeLessThanOrEqual(last.get(session)!);
          continue;
        }
        expect(frame.number).toBe((last.get(session) ?? 0) + 1);
        last.set(session, frame.number);
        if (frame.body.kind === "call" && frame.body.call.op === "boAlloc" && e.code === 0) {
          expect(frame.body.call.sizeBytes).toBeLessThanOrEqual(WORKLOAD_LIMITS.maxBoBytes);
        }
      }
    }
  });
});

/** Every step whose outcome differs from the generator's expectation, described. */
function mismatches(workload: Workload, deviceSeed: number): string[] {
  const { outcomes } = replay(workload, deviceSeed);
  const found: string[] = [];
  for (const [i, step] of workload.steps.entries()) {
    const outcome = outcomes[i]!;
    const { expect: e } = step;
    const handle =
      outcome.result.output.kind === "handle" ? outcome.result.output.handle : undefined;
    const same =
      outcome.kind === e.outcome &&
      outcome.result.code === e.code &&
      (e.handle === undefined || handle === e.handle);
    if (!same) {
      found.push(
        `step ${i} ${e.action}: expected ${e.outcome}/${e.code}/${e.handle}, ` +
          `got ${outcome.kind}/${outcome.result.code}/${handle} (${outcome.result.message})`,
      );
    }
  }
  return found;
}

describe("the generator's model agrees with the backend", () => {
  it.each(SEEDS)("on the fixed workload of seed %i", (seed) => {
    expect(mismatches(workloads[SEEDS.indexOf(seed)]!, 1000 + seed)).toEqual([]);
  });

  it("on random workloads", () => {
    fc.assert(
      fc.property(workloadArb({ maxFrames: 250, sessions: 3, invalidPercent: 25 }), (w) => {
        expect(mismatches(w, 9)).toEqual([]);
      }),
      { numRuns: 25 },
    );
  });
});
