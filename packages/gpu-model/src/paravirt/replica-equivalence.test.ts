// Proves the replication premise (DESIGN §4, §10): one random call/store history applied through
// Backend.applyFrame on two devices with different handle seeds gives equal per-frame results and
// equal digests although every device handle differs, and one extra byte-changing store is seen
// by the gpu digest. Random workloads come from testing/random-workload.ts.
import { ErrorCode, type FrameBody } from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { computeDigest } from "../digest.js";
import {
  generateWorkload,
  replay,
  type Workload,
  workloadArb,
} from "../testing/random-workload.js";
import { storeBatch, TestGuest, testBackendOptions } from "../testing/test-guest.js";
import { Backend, type FrameOutcome } from "./backend.js";

/** What a replica must agree on for a frame: outcome kind, code and output (not the message). */
const summary = (o: FrameOutcome) => ({
  kind: o.kind,
  code: o.result.code,
  output: o.result.output,
});

/** guest address ("c3" or "c3/b2") → device handle, for every live context and buffer. */
function deviceHandles(backend: Backend): Map<string, number> {
  const handles = new Map<string, number>();
  for (const [c, ctx] of backend.contexts) {
    handles.set(`c${c}`, ctx.device.handle);
    for (const [b, gbo] of ctx.bos) handles.set(`c${c}/b${b}`, gbo.bo.id);
  }
  return handles;
}

/** Applies `body` as session s0's next frame on each backend; the results must agree. */
function onBoth(a: Backend, b: Backend, body: FrameBody) {
  const [ra, rb] = [a, b].map((backend) => {
    const session = backend.sessions.get("s0")!;
    return backend.applyFrame(session, { number: session.lastFrame + 1, body });
  });
  expect(summary(rb!)).toEqual(summary(ra!));
  return ra!.result;
}

/** A mapped buffer of session s0 on both backends, made with extra frames when there is none. */
function mappedBuffer(a: Backend, b: Backend): { context: number; bo: number } {
  const own = [...a.contexts.values()].filter((ctx) => ctx.sessionId === "s0");
  for (const ctx of own) {
    for (const gbo of ctx.bos.values()) {
      if (!gbo.bo.mapped)
        onBoth(a, b, { kind: "call", call: { op: "boMap", context: ctx.handle, bo: gbo.handle } });
      return { context: ctx.handle, bo: gbo.handle };
    }
  }
  let context = own[0]?.handle;
  if (context === undefined) {
    const created = onBoth(a, b, { kind: "call", call: { op: "contextCreate" } });
    if (created.output.kind !== "handle") throw new Error("contextCreate gave no handle");
    context = created.output.handle;
  }
  const alloc = onBoth(a, b, { kind: "call", call: { op: "boAlloc", context, sizeBytes: 4096 } });
  if (alloc.output.kind !== "handle") throw new Error(`boAlloc failed: ${alloc.message}`);
  const bo = alloc.output.handle;
  onBoth(a, b, { kind: "call", call: { op: "boMap", context, bo } });
  return { context, bo };
}

function checkReplicas(workload: Workload, seedA: number, seedB: number): void {
  // All of A first, then all of B: the two runs may also meet different JIT tiers.
  const a = replay(workload, seedA);
  const b = replay(workload, seedB);
  expect(b.outcomes.map(summary)).toEqual(a.outcomes.map(summary));
  expect(computeDigest(b.backend)).toEqual(computeDigest(a.backend));

  // The same dirty pages wait to be shipped, named by guest handles.
  expect(b.backend.takeDirtyPages()).toEqual(a.backend.takeDirtyPages());

  // Same guest addresses, all different device handles: the mapping is what makes them equal.
  const handlesA = deviceHandles(a.backend);
  const handlesB = deviceHandles(b.backend);
  expect([...handlesB.keys()]).toEqual([...handlesA.keys()]);
  for (const [address, handle] of handlesA) expect(handlesB.get(address), address).not.toBe(handle);

  // One more store that flips a byte, on B only: the gpu digest sees it; then on A: equal again.
  const { context, bo } = mappedBuffer(a.backend, b.backend);
  const vram = a.backend.contexts.get(context)!.bos.get(bo)!.bo.bytes;
  const offset = (workload.seed * 13) % vram.length;
  const body: FrameBody = {
    kind: "stores",
    batch: storeBatch(context, bo, [{ offset, bytes: [vram[offset]! ^ 0xa5] }]),
  };
  const sb = b.backend.sessions.get("s0")!;
  const sa = a.backend.sessions.get("s0")!;
  expect(b.backend.applyFrame(sb, { number: sb.lastFrame + 1, body }).result.code).toBe(
    ErrorCode.OK,
  );
  expect(computeDigest(b.backend).gpu).not.toBe(computeDigest(a.backend).gpu);
  expect(a.backend.applyFrame(sa, { number: sa.lastFrame + 1, body }).result.code).toBe(
    ErrorCode.OK,
  );
  expect(computeDigest(b.backend)).toEqual(computeDigest(a.backend));
}

describe("two devices with different handle seeds, one history", () => {
  it("agree on every frame's result and on the digest (random workloads)", () => {
    fc.assert(
      fc.property(
        workloadArb({ maxFrames: 300, sessions: 3, tenants: 2 }),
        fc.integer({ min: 0, max: 0x7fffffff }),
        fc.integer({ min: 1, max: 0x7fffffff }),
        (workload, seedA, delta) => checkReplicas(workload, seedA, (seedA + delta) >>> 0),
      ),
      { numRuns: 40 },
    );
  });

  it("agree after a long fault-heavy history of four sessions", () => {
    const workload = generateWorkload(2024, { frames: 3000, sessions: 4, invalidPercent: 20 });
    checkReplicas(workload, 1, 2);
  });

  it("give a different gpu digest when the histories differ by one store", () => {
    // The same check as above, spelled out on a hand-made history.
    const a = new Backend(testBackendOptions({ device: { seed: 11 } }));
    const b = new Backend(testBackendOptions({ device: { seed: 12 } }));
    const guests = [new TestGuest(a, "s0"), new TestGuest(b, "s0")];
    for (const g of guests) {
      const ctx = g.createContext();
      const bo = g.alloc(ctx, 8192);
      g.map(ctx, bo);
      g.store(ctx, bo, [{ offset: 4096, bytes: [1, 2, 3, 4] }]);
    }
    expect(computeDigest(b)).toEqual(computeDigest(a));
    guests[1]!.store(1, 1, [{ offset: 4097, bytes: [9] }]);
    expect(computeDigest(b).gpu).not.toBe(computeDigest(a).gpu);
  });

  it("refuse a launch with the same reply message on both (no device handle in it)", () => {
    // Replies are cached in the replicated session table and re-sent after a failover, so
    // they must not depend on the node: a device handle in a message differs between nodes.
    const messages = [21, 22].map((seed) => {
      const g = new TestGuest(new Backend(testBackendOptions({ device: { seed } })), "s0");
      const ctx = g.createContext();
      const bo = g.alloc(ctx, 4096);
      const args = [bo, bo, bo].map((h) => ({ kind: "buffer" as const, bo: h }));
      const n = { kind: "u32" as const, value: 1 };
      const result = g.call({
        op: "kernelLaunch",
        context: ctx,
        kernel: "gemm_f32",
        args: [...args, n, n, n],
      });
      expect(result.code).toBe(ErrorCode.BAD_KERNEL_ARGS);
      return result.message;
    });
    expect(messages[1]).toBe(messages[0]);
  });
});
