// Proves the executor of a device still starting: operations submitted meanwhile complete in
// order once it is ready, later ones go straight through, a device that cannot start reports
// the failure to the queue, and one closed before it is ready is closed when it comes.
import type { DeviceOp, ExecutorSink, OpResult } from "@vgpu-ha/gpu-model";
import { InlineExecutor } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { DeferredExecutor } from "./deferred-executor.js";

function recordingSink() {
  const completed: number[] = [];
  const failures: string[] = [];
  const sink: ExecutorSink = {
    complete: (index: number, _result: OpResult) => completed.push(index),
    progressed: () => {},
    failed: (reason) => failures.push(reason),
  };
  return { sink, completed, failures };
}

function opening() {
  let open!: (e: InlineExecutor) => void;
  let refuse!: (e: Error) => void;
  const promise = new Promise<InlineExecutor>((resolve, reject) => {
    open = resolve;
    refuse = reject;
  });
  return { promise, open, refuse };
}

const alloc = (id: number): DeviceOp => ({ k: "alloc", id, size: 4096 });
const settle = () => new Promise((r) => setImmediate(r));

describe("DeferredExecutor", () => {
  it("holds operations until the device is ready, then runs them in order", async () => {
    const o = opening();
    const deferred = new DeferredExecutor(o.promise);
    const { sink, completed } = recordingSink();
    deferred.attach(sink);
    deferred.submit(1, alloc(10));
    deferred.submit(2, { k: "write", id: 10, offset: 0, data: new Uint8Array([7]) });
    expect(completed).toEqual([]);
    expect(() => deferred.peek(10)).toThrow(/still starting/);
    const inner = new InlineExecutor();
    o.open(inner);
    await settle();
    expect(completed).toEqual([1, 2]);
    deferred.submit(3, alloc(11));
    expect(completed).toEqual([1, 2, 3]);
    expect(deferred.peek(10).bytes[0]).toBe(7);
  });

  it("a device that cannot start fails the queue, and drops what was held", async () => {
    const o = opening();
    const deferred = new DeferredExecutor(o.promise);
    const { sink, completed, failures } = recordingSink();
    deferred.attach(sink);
    deferred.submit(1, alloc(10));
    o.refuse(new Error("golden vector gemm_f32 differs"));
    await settle();
    expect(failures).toEqual(["the device did not start: golden vector gemm_f32 differs"]);
    deferred.submit(2, alloc(11));
    expect(completed).toEqual([]);
  });

  it("closed before the device is ready: the device is closed when it comes", async () => {
    const o = opening();
    const deferred = new DeferredExecutor(o.promise);
    const { sink, completed, failures } = recordingSink();
    deferred.attach(sink);
    deferred.submit(1, alloc(10));
    deferred.close();
    const inner = new InlineExecutor();
    let closed = false;
    inner.close = () => {
      closed = true;
    };
    o.open(inner);
    await settle();
    expect(closed).toBe(true);
    expect(completed).toEqual([]);
    expect(failures).toEqual([]);
  });
});
