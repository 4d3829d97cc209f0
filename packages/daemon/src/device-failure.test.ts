// Proves what a node does when its device fails, in order: the gauge and the counter first,
// one error line naming the frame in flight, then — a primary — the notice to its standby
// (waited for, within a bound), then the node's stop; a standby has nothing to name and stops
// at once; a stop that never ends does not hold the exit past its bound.
import { PassThrough } from "node:stream";
import { createLogger, createMetrics, NO_REPLICATION, type NodeGauges } from "@vgpu-ha/common";
import type { DeviceFailure } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { stepDownForDevice } from "./device-failure.js";
import type { Role } from "./roles/role.js";

const gauges: NodeGauges = {
  role: () => "primary",
  epoch: () => 1,
  sessions: () => 0,
  contexts: () => 0,
  bos: () => 0,
  vramUsedBytes: () => 0,
  vramTotalBytes: () => 0,
  replication: () => NO_REPLICATION,
  leaseDurationSeconds: () => 0.5,
};

const failure: DeviceFailure = { reason: "work past device.maxCallMs (300 ms)", seq: 9 };

function harness(role: Partial<Role> & { name: Role["name"] }, stop: () => Promise<void>) {
  const out = new PassThrough();
  const lines: Record<string, unknown>[] = [];
  out.on("data", (chunk: Buffer) => {
    for (const l of chunk.toString().split("\n")) if (l) lines.push(JSON.parse(l));
  });
  const events: string[] = [];
  const metrics = createMetrics(gauges);
  const log = createLogger({ level: "info", nodeId: "a", destination: out });
  const deps = {
    log: () => log,
    metrics,
    role: () => role as Role,
    stop: async () => {
      events.push("stop");
      await stop();
    },
  };
  const counted = async () =>
    (await metrics.registry.getSingleMetric("vgpu_device_failures_total")?.get())?.values;
  return { deps, lines, events, metrics, counted };
}

describe("stepDownForDevice", () => {
  it("a primary: counts, logs the frame in flight, waits for its notice to leave, then stops", async () => {
    let sent = false;
    const events: string[] = [];
    const primary = {
      name: "primary" as const,
      deviceFailed: (f: DeviceFailure) => {
        events.push(`named ${f.seq}`);
        setTimeout(() => {
          events.push("notice sent");
          sent = true;
        }, 20);
        return { frames: [{ sessionId: "s", frame: 3, seq: 9 }], sent: () => sent };
      },
    };
    const h = harness(primary, async () => {});
    await stepDownForDevice(h.deps, failure, { noticeMs: 1000, stopMs: 1000 });
    expect([...events, ...h.events]).toEqual(["named 9", "notice sent", "stop"]);
    expect((await h.metrics.deviceFailed.get()).values[0]?.value).toBe(1);
    expect(await h.counted()).toEqual([{ value: 1, labels: { whose: "own" } }]);
    const line = h.lines.find((l) => String(l.msg).startsWith("device failed"));
    expect(line).toMatchObject({ level: 50, seq: 9, inFlight: ["s#3 (seq 9)"], role: "primary" });
  });

  it("a notice that cannot leave holds the stop only for its bound", async () => {
    const primary = {
      name: "primary" as const,
      deviceFailed: () => ({ frames: [], sent: () => false }),
    };
    const h = harness(primary, async () => {});
    await stepDownForDevice(h.deps, failure, { noticeMs: 30, stopMs: 1000 });
    expect(h.events).toEqual(["stop"]);
  });

  it("a standby stops at once; a stop that never ends is bounded", async () => {
    const h = harness({ name: "standby" }, () => new Promise<void>(() => {}));
    await stepDownForDevice(h.deps, failure, { noticeMs: 1000, stopMs: 30 });
    expect(h.events).toEqual(["stop"]);
    expect(h.lines.some((l) => l.role === "standby" && l.level === 50)).toBe(true);
  });
});
