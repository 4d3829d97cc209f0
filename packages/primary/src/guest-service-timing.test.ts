// Proves the guest service times each frame with one read of its service clock: every applied
// call is observed once in vgpu_call_duration_seconds, the observed times add up to the clock's
// advance over the frames (none counted twice, none lost), and the clock is read about once
// per frame, not three times.
import { type Call, createMetrics, idleGauges } from "@vgpu-ha/common";
import type { BackendOptions } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { guestHarness } from "./testing/guest-harness.js";
import { framesMsg, openMsg } from "./testing/guest-wire.js";

const BACKEND: BackendOptions = {
  device: { seed: 3, vramBytes: 64 << 20, maxBoBytes: 4 << 20, maxKernelWork: 1 << 24 },
  tenants: new Map([["a", { vramBytes: 16 << 20, bos: 64, contexts: 8 }]]),
  session: { replyCacheFrames: 4096, replyCacheBytes: 1 << 24 },
  maxDmaBytes: 1 << 20,
  maxStoresPerBatch: 1024,
  trackMmio: false,
};
const TENANTS = [{ name: "a", token: "token-of-a-0001" }];
const frames = (first: number, calls: readonly Call[]) =>
  framesMsg(
    first,
    calls.map((call) => ({ call })),
  );

describe("guest service call timing", () => {
  it("observes each call once, from one clock read per frame", async () => {
    const STEP_MS = 0.0005; // each read of the clock advances it by 0.5 µs
    let reads = 0;
    const cpuMs = () => ++reads * STEP_MS;
    const metrics = createMetrics(
      idleGauges("standalone", () => 0),
      { processMetrics: false },
    );
    const h = guestHarness({ backend: BACKEND, tenants: TENANTS, cpuMs, metrics });
    const s = h.connect();
    s.send(openMsg("a", "", "token-of-a-0001"));
    s.send(frames(1, [{ op: "contextCreate" }]));
    await h.settled();
    const FENCES = 200;
    const readsBefore = reads;
    s.send(
      frames(
        2,
        Array.from({ length: FENCES }, () => ({ op: "fence", context: 1 }) as Call),
      ),
    );
    await h.settled();
    const fence = [...metrics.callStats.durationCounts()].find((d) => d.op === "fence")!;
    expect(fence.count).toBe(FENCES);
    // One read per frame plus a few per slice and turn (a slice is 2 ms = 4000 reads here).
    const readsForFences = reads - readsBefore;
    expect(readsForFences).toBeGreaterThanOrEqual(FENCES);
    expect(readsForFences).toBeLessThanOrEqual(FENCES + 4);
    // Each frame's time is the clock's advance since the previous frame (or the slice's start).
    expect(fence.sum).toBeCloseTo((FENCES * STEP_MS) / 1000, 12);
    expect(fence.perBucket[0]).toBe(FENCES); // 0.5 µs each: the first bucket (le 1e-6)
    const exposed = await metrics.registry.getSingleMetricAsString("vgpu_call_duration_seconds");
    expect(exposed).toContain('vgpu_call_duration_seconds_count{op="fence"} 200');
  });
});
