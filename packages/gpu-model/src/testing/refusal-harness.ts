// The harness of the backend refusal tests (paravirt/backend-refusals-*.test.ts): a backend
// holding data, dirty pages and sessions of two tenants, and expectRefused, which sends one bad
// frame and checks it was refused with its exact code and changed nothing but the session table.
import {
  type Call,
  type ErrorCode,
  errorName,
  type FrameBody,
  type KernelArg,
  type StoreBatch,
} from "@vgpu-ha/common/core";
import { expect } from "vitest";
import { computeDigest } from "../digest.js";
import { Backend } from "../paravirt/backend.js";
import {
  OTHER_TENANT,
  TEST_TENANT,
  type TestBackendOverrides,
  TestGuest,
  testBackendOptions,
} from "./test-guest.js";

export const BIG = 8192; // buffer A: mapped, with data
export const SMALL = 4096; // buffer B: not mapped

/** A backend with data, dirty pages and three sessions (two of the guest's tenant). */
export function setup(overrides: TestBackendOverrides = {}) {
  const backend = new Backend(testBackendOptions(overrides));
  const g = new TestGuest(backend, "guest", TEST_TENANT);
  const ctx = g.createContext();
  const a = g.alloc(ctx, BIG);
  const b = g.alloc(ctx, SMALL);
  const pattern = Uint8Array.from({ length: BIG }, (_, i) => (i * 7) & 0xff);
  g.write(ctx, a, 0, pattern.subarray(0, 4096));
  g.write(ctx, a, 4096, pattern.subarray(4096));
  g.write(ctx, b, 100, Uint8Array.of(5, 6, 7));
  g.map(ctx, a);
  g.store(ctx, a, [{ offset: 16, bytes: [1, 2, 3, 4] }]);
  const neighbour = new TestGuest(backend, "neighbour", TEST_TENANT);
  const neighbourCtx = neighbour.createContext();
  neighbour.alloc(neighbourCtx, SMALL);
  const stranger = new TestGuest(backend, "stranger", OTHER_TENANT);
  const strangerCtx = stranger.createContext();
  stranger.alloc(strangerCtx, SMALL);
  return { backend, g, ctx, a, b, neighbour, neighbourCtx, stranger, strangerCtx };
}

/** Everything but the session table that a refused call must leave alone. */
function gpuState(backend: Backend) {
  return {
    gpu: computeDigest(backend).gpu,
    vramUsedBytes: backend.device.vram.usedBytes,
    deviceBos: backend.device.boCount,
    deviceContexts: backend.device.contextCount,
    usage: [TEST_TENANT, OTHER_TENANT].map((t) => ({ ...backend.tenantUsage(t) })),
    pendingStores: backend.mmio.pendingStores,
    dirtyPages: backend.mmio.dirtyPageCount,
    nextContextHandle: backend.nextContextHandle,
  };
}

/** Sends `body` as g's next frame; it must be applied with `code` and change only the session table. */
export function expectRefused(g: TestGuest, body: FrameBody, code: ErrorCode) {
  const before = gpuState(g.backend);
  const sessionsBefore = computeDigest(g.backend).sessions;
  const frame = g.session.lastFrame + 1;
  const outcome = g.send(body);
  expect(outcome.kind).toBe("applied");
  expect(errorName(outcome.result.code)).toBe(errorName(code));
  expect(outcome.result.output.kind).toBe("none");
  expect(gpuState(g.backend)).toEqual(before);
  // The frame counts as applied: the session moved on and cached the error reply.
  expect(g.session.lastFrame).toBe(frame);
  expect(g.session.replies.get(frame)).toBe(outcome.result);
  expect(computeDigest(g.backend).sessions).not.toBe(sessionsBefore);
  return outcome.result;
}

export const call = (c: Call): FrameBody => ({ kind: "call", call: c });
export const stores = (batch: StoreBatch): FrameBody => ({ kind: "stores", batch });
export const buf = (bo: number): KernelArg => ({ kind: "buffer", bo });
export const u32 = (value: number): KernelArg => ({ kind: "u32", value });
export const f32 = (value: number): KernelArg => ({ kind: "f32", value });
export const launch = (context: number, kernel: string, args: KernelArg[]) =>
  call({ op: "kernelLaunch", context, kernel, args });
