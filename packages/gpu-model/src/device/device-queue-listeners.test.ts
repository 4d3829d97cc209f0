// Proves progress listeners are never called from inside a submit (issue #14): an inline device
// completes its work within submit, and the caller (a snapshot's next() mid-way, a sender
// polling) is still on the stack, so the queue tells no listener then — as InlineProgress never
// did; work a held device completes later is told to every listener.
import { describe, expect, it } from "vitest";
import { Backend } from "../paravirt/backend.js";
import { TestGuest, testBackendOptions } from "../testing/test-guest.js";
import { ManualExecutor } from "./executor.js";

function guestOn(backend: Backend) {
  const g = new TestGuest(backend, "g");
  const ctx = g.createContext();
  const bo = g.alloc(ctx, 4096);
  return { g, ctx, bo };
}

describe("DeviceQueue progress listeners", () => {
  it("are not called by an inline device's completions inside submit", () => {
    const backend = new Backend(testBackendOptions());
    let told = 0;
    backend.progress.onProgress(() => told++);
    const { g, ctx, bo } = guestOn(backend);
    g.write(ctx, bo, 0, Uint8Array.of(1, 2, 3));
    expect(Array.from(g.read(ctx, bo, 0, 3))).toEqual([1, 2, 3]);
    expect(backend.progress.doneSeq(5)).toBe(5);
    expect(told).toBe(0);
  });

  it("are called when a held device completes work later", () => {
    const executor = new ManualExecutor();
    const backend = new Backend({ ...testBackendOptions(), executor: () => executor });
    let told = 0;
    backend.progress.onProgress(() => told++);
    const { g, ctx, bo } = guestOn(backend);
    g.write(ctx, bo, 0, Uint8Array.of(9));
    expect(told).toBe(0);
    expect(executor.runAll()).toBeGreaterThan(0);
    expect(told).toBe(1);
  });
});
