// Proves the per-call metrics counted in plain numbers expose, at scrape time, exactly what the
// prom-client Counter and Histogram they replaced expose when fed the same frames and calls
// (text exposition and JSON, for random ops, codes, outcomes and durations including values
// on the bucket bounds), and that two registries in one process do not collide.
import fc from "fast-check";
import { Counter, Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { CALL_DURATION_BUCKETS_SECONDS, CallStats, registerCallMetrics } from "./call-stats.js";

/** The metrics as they were: one prom-client Counter.inc and Histogram.observe per call. */
function previousMetrics() {
  const registry = new Registry();
  const registers = [registry];
  return {
    registry,
    frames: new Counter({
      name: "vgpu_frames_total",
      help: "Guest frames by outcome (applied, duplicate, rejected)",
      labelNames: ["outcome"],
      registers,
    }),
    calls: new Counter({
      name: "vgpu_calls_total",
      help: "Paravirtual calls executed, by operation and result code",
      labelNames: ["op", "code"],
      registers,
    }),
    callDuration: new Histogram({
      name: "vgpu_call_duration_seconds",
      help: "Time to execute one paravirtual call on this node",
      labelNames: ["op"],
      buckets: [1e-6, 5e-6, 2e-5, 1e-4, 5e-4, 2e-3, 1e-2, 5e-2, 0.25, 1],
      registers,
    }),
  };
}

const secondsArb = fc.oneof(
  fc.constantFrom(0, ...CALL_DURATION_BUCKETS_SECONDS, 1.5, 30),
  fc.double({ min: 0, max: 2, noNaN: true }),
);
const eventArb = fc.record({
  outcome: fc.constantFrom("applied", "duplicate", "rejected"),
  op: fc.constantFrom("kernelLaunch", "dmaWrite", "stores", "boAlloc"),
  code: fc.constantFrom("OK", "OUT_OF_BOUNDS", "LIMIT_EXCEEDED"),
  seconds: secondsArb,
});

describe("CallStats", () => {
  it("exposes what the prom-client counter and histogram exposed for the same calls", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(eventArb, { maxLength: 200 }), async (events) => {
        const before = previousMetrics();
        const registry = new Registry();
        const stats = new CallStats();
        registerCallMetrics(stats, registry);
        for (const { outcome, op, code, seconds } of events) {
          before.frames.inc({ outcome });
          stats.frame(outcome).count++;
          if (outcome !== "applied") continue;
          before.calls.inc({ op, code });
          before.callDuration.observe({ op }, seconds);
          stats.call(op, code).count++;
          stats.duration(op).observe(seconds);
        }
        expect(await registry.metrics()).toBe(await before.registry.metrics());
        expect(await registry.getMetricsAsJSON()).toEqual(await before.registry.getMetricsAsJSON());
      }),
      { numRuns: 60 },
    );
  });

  it("keeps counting across scrapes (counters never go back)", async () => {
    const registry = new Registry();
    const stats = new CallStats();
    registerCallMetrics(stats, registry);
    stats.call("boAlloc", "OK").count += 2;
    await registry.metrics();
    stats.call("boAlloc", "OK").count++;
    stats.duration("boAlloc").observe(3e-6);
    const text = await registry.metrics();
    expect(text).toContain('vgpu_calls_total{op="boAlloc",code="OK"} 3');
    expect(text).toContain('vgpu_call_duration_seconds_bucket{le="0.000005",op="boAlloc"} 1');
    expect(text).toContain('vgpu_call_duration_seconds_count{op="boAlloc"} 1');
  });

  it("registers into its own registry only, so several nodes can share a process", () => {
    const a = new Registry();
    const b = new Registry();
    registerCallMetrics(new CallStats(), a);
    registerCallMetrics(new CallStats(), b);
    expect(a.getSingleMetric("vgpu_call_duration_seconds")).toBeDefined();
    expect(b.getSingleMetric("vgpu_call_duration_seconds")).toBeDefined();
  });
});
