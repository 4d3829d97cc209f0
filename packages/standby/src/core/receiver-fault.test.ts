// Proves a standby keeps what its primary's DeviceFault names (the frames whose device work was
// running when that device failed), reports it as an event, bounds what it keeps, refuses a
// stale epoch's notice like any message, and hands the frames over with the replica at
// promotion, so the new primary answers them DEVICE_FAULT instead of running them again.
import type { PrimaryMessage } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { replicaReceiver } from "../testing/backend-options.js";

const replica = replicaReceiver;

const fault = (epoch: number, frames: { sessionId: string; frame: number; seq: number }[]) =>
  ({ kind: "deviceFault", epoch, frames, reason: "work past device.maxCallMs" }) as PrimaryMessage;

describe("a DeviceFault from the primary", () => {
  it("is kept, reported and acknowledged", () => {
    const r = replica();
    const out = r.step(fault(3, [{ sessionId: "s", frame: 7, seq: 40 }]));
    expect(out.map((m) => m.kind)).toEqual(["ack"]);
    expect(r.faultedFrames).toEqual([{ sessionId: "s", frame: 7, seq: 40 }]);
    expect(r.events.at(-1)).toMatchObject({ kind: "deviceFault" });
    expect(r.events.at(-1)?.detail).toContain("s#7 (seq 40)");
  });

  it("from an older epoch is refused and not kept", () => {
    const r = replica(5);
    const out = r.step(fault(4, [{ sessionId: "s", frame: 7, seq: 40 }]));
    expect(out.map((m) => m.kind)).toEqual(["error"]);
    expect(r.faultedFrames).toEqual([]);
  });

  it("keeps at most 64 frames, the newest", () => {
    const r = replica();
    for (let i = 1; i <= 70; i++) r.step(fault(3, [{ sessionId: "s", frame: i, seq: i }]));
    expect(r.faultedFrames).toHaveLength(64);
    expect(r.faultedFrames[0]?.frame).toBe(7);
    expect(r.faultedFrames.at(-1)?.frame).toBe(70);
  });
});
