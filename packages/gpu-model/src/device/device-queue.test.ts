// Proves the op queue between the paravirtual layer and the device (issue #14), with a device
// held by the test (ManualExecutor): results codes are decided at once and work runs later in
// submit order; a dmaRead's data is filled only when the device completes it; doneSeq names
// the entries whose work is complete and afterDevice waits for everything submitted before it;
// a snapshot taken while writes continue holds the bytes as they were at its start
// (copy-on-write through queued "preserve" ops), read chunk by chunk as the device answers;
// and a failed device completes nothing more.
import { ErrorCode } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { computeDigest, digestWhenDone, type StateDigest } from "../digest.js";
import { Backend } from "../paravirt/backend.js";
import { SnapshotSink } from "../snapshot/snapshot-sink.js";
import { SnapshotSource } from "../snapshot/snapshot-source.js";
import { TestGuest, testBackendOptions } from "../testing/test-guest.js";
import { ManualExecutor } from "./executor.js";

function held() {
  const executor = new ManualExecutor();
  const backend = new Backend({ ...testBackendOptions(), executor: () => executor });
  const g = new TestGuest(backend, "g");
  return { executor, backend, g };
}

describe("DeviceQueue with a held device", () => {
  it("decides codes at once and runs the byte work later, in order; reads fill on completion", () => {
    const { executor, backend, g } = held();
    const ctx = g.createContext();
    const bo = g.alloc(ctx, 4096);
    g.write(ctx, bo, 0, Uint8Array.of(1, 2, 3));
    const before = g.read(ctx, bo, 0, 3);
    g.write(ctx, bo, 0, Uint8Array.of(9, 9, 9));
    const after = g.read(ctx, bo, 1, 2);
    expect(g.call({ op: "dmaRead", context: ctx, bo, offset: 4095, length: 2 }).code).toBe(
      ErrorCode.OUT_OF_BOUNDS,
    );
    expect(executor.pending).toBe(5); // alloc, write, read, write, read
    expect([...before, ...after]).toEqual([0, 0, 0, 0, 0]);
    executor.run(3);
    expect([...before]).toEqual([1, 2, 3]);
    expect([...after]).toEqual([0, 0]);
    executor.runAll();
    expect([...after]).toEqual([9, 9]);
    expect(backend.progress.doneSeq(5)).toBe(5);
  });

  it("says which seqs' work is done, and calls afterDevice once all before it completed", () => {
    const { executor, backend, g } = held();
    const progress = backend.progress;
    progress.beginSeq(1);
    const ctx = g.createContext(); // no device work
    progress.beginSeq(2);
    const bo = g.alloc(ctx, 4096);
    progress.beginSeq(3);
    g.write(ctx, bo, 0, Uint8Array.of(1));
    progress.beginSeq(4);
    g.write(ctx, bo, 0, Uint8Array.of(2));
    expect(progress.doneSeq(4)).toBe(1);
    const order: string[] = [];
    let progressed = 0;
    progress.onProgress(() => progressed++);
    progress.afterDevice(() => order.push("after-3-ops"));
    progress.beginSeq(5);
    g.write(ctx, bo, 0, Uint8Array.of(3));
    progress.afterDevice(() => order.push("after-4-ops"));
    executor.run(1);
    expect(progress.doneSeq(5)).toBe(2);
    expect(order).toEqual([]);
    executor.run(2);
    expect(progress.doneSeq(5)).toBe(4);
    expect(progress.doneSeq(3)).toBe(3);
    expect(order).toEqual(["after-3-ops"]);
    executor.run(1);
    expect(order).toEqual(["after-3-ops", "after-4-ops"]);
    expect(progress.doneSeq(5)).toBe(5);
    expect(progressed).toBe(3);
    let now = false;
    progress.afterDevice(() => {
      now = true;
    });
    expect(now).toBe(true);
  });

  it("digests the state at the call, whatever runs after it", () => {
    const { executor, backend, g } = held();
    const ctx = g.createContext();
    const bo = g.alloc(ctx, 4096);
    g.write(ctx, bo, 0, Uint8Array.of(5));
    let digest: StateDigest | undefined;
    digestWhenDone(backend, (d) => {
      digest = d;
    });
    g.write(ctx, bo, 0, Uint8Array.of(6));
    g.alloc(ctx, 4096);
    expect(digest).toBeUndefined();
    expect(() => computeDigest(backend)).toThrow(/inline/);
    executor.runAll();
    const inline = new TestGuest(new Backend(testBackendOptions()), "g");
    const c2 = inline.createContext();
    inline.write(c2, inline.alloc(c2, 4096), 0, Uint8Array.of(5));
    expect(digest?.gpu).toBe(computeDigest(inline.backend).gpu);
  });

  it("snapshots the bytes as they were at its start while writes continue (copy-on-write)", () => {
    const { executor, backend, g } = held();
    const ctx = g.createContext();
    const a = g.alloc(ctx, 4 * 4096);
    const b = g.alloc(ctx, 2 * 4096);
    g.write(ctx, a, 0, new Uint8Array(4 * 4096).fill(1));
    g.write(ctx, b, 4096, new Uint8Array(4096).fill(2));
    executor.runAll();
    const expected = new TestGuest(new Backend(testBackendOptions({ device: { seed: 3 } })), "g");
    const source = new SnapshotSource(backend, 1, 0, 4096);
    source.onChunkReady = () => {};
    const chunk0 = source.next()!;
    // Writes during the snapshot: into pages not yet sent, a buffer freed, a kernel.
    g.write(ctx, a, 3 * 4096, new Uint8Array(4096).fill(7));
    g.call({ op: "boFree", context: ctx, bo: b });
    expect(source.ready()).toBe(false);
    const sink = new SnapshotSink(testBackendOptions({ device: { seed: 9 } }), chunk0);
    expect(sink.accept(chunk0)).toBeNull();
    while (!sink.done) {
      executor.run(1);
      while (source.ready() && !source.done) expect(sink.accept(source.next()!)).toBeNull();
    }
    executor.runAll();
    // The copy equals a state with the same history up to the snapshot's start.
    const c = expected.createContext();
    const ea = expected.alloc(c, 4 * 4096);
    const eb = expected.alloc(c, 2 * 4096);
    expected.write(c, ea, 0, new Uint8Array(4 * 4096).fill(1));
    expected.write(c, eb, 4096, new Uint8Array(4096).fill(2));
    expect(computeDigest(sink.result()!).gpu).toBe(computeDigest(expected.backend).gpu);
  });

  it("completes nothing after the device failed", () => {
    const { executor, backend, g } = held();
    backend.progress.beginSeq(3);
    const ctx = g.createContext();
    const bo = g.alloc(ctx, 4096);
    const data = g.read(ctx, bo, 0, 1);
    const failures: unknown[] = [];
    backend.progress.onFailure((f) => failures.push(f));
    let after = false;
    backend.progress.afterDevice(() => {
      after = true;
    });
    executor.fail("hung");
    expect(failures).toEqual([{ reason: "hung", seq: 3 }]);
    expect(backend.progress.failure).toEqual({ reason: "hung", seq: 3 });
    expect(executor.runAll()).toBe(0);
    expect(after).toBe(false);
    expect(data).toEqual(new Uint8Array(1));
    expect(backend.progress.doneSeq(4)).toBe(2);
  });
});
