// A guest for tests: one session on a backend that numbers its own frames, with shorthands for
// the calls and store batches, and small backend options to start from. Throws (never asserts)
// so any test runner can use it.
import {
  type Call,
  type CallResult,
  ErrorCode,
  type FrameBody,
  type StoreBatch,
} from "@vgpu-ha/common/core";
import type { DeviceOptions } from "../device/device.js";
import type { Backend, BackendOptions, FrameOutcome, TenantQuota } from "../paravirt/backend.js";
import { type SessionLimits, SessionRecord } from "../paravirt/session-table.js";

export const TEST_TENANT = "t1";
export const OTHER_TENANT = "t2";

export interface TestBackendOverrides {
  readonly device?: Partial<DeviceOptions>;
  readonly tenants?: ReadonlyMap<string, TenantQuota>;
  readonly session?: Partial<SessionLimits>;
  readonly maxDmaBytes?: number;
  readonly maxStoresPerBatch?: number;
  readonly trackMmio?: boolean;
}

/** Small, roomy options (two tenants) with any field overridden. */
export function testBackendOptions(overrides: TestBackendOverrides = {}): BackendOptions {
  return {
    device: {
      seed: 1,
      vramBytes: 64 << 20,
      maxBoBytes: 16 << 20,
      maxKernelWork: 1 << 26,
      ...overrides.device,
    },
    tenants:
      overrides.tenants ??
      new Map([
        [TEST_TENANT, { vramBytes: 32 << 20, bos: 1000 }],
        [OTHER_TENANT, { vramBytes: 32 << 20, bos: 1000 }],
      ]),
    session: { replyCacheFrames: 1024, replyCacheBytes: 1 << 24, ...overrides.session },
    maxDmaBytes: overrides.maxDmaBytes ?? 1 << 20,
    maxStoresPerBatch: overrides.maxStoresPerBatch ?? 4096,
    trackMmio: overrides.trackMmio ?? true,
  };
}

/** One store: `bytes.length` (1, 2, 4 or 8) bytes at `offset`. */
export interface Store {
  readonly offset: number;
  readonly bytes: ArrayLike<number>;
}

export function storeBatch(context: number, bo: number, stores: readonly Store[]): StoreBatch {
  const data: number[] = [];
  for (const s of stores) data.push(...Array.from(s.bytes));
  return {
    context,
    bo,
    offsets: stores.map((s) => s.offset),
    widths: Uint8Array.from(stores.map((s) => s.bytes.length)),
    data: Uint8Array.from(data),
  };
}

export class TestGuest {
  readonly backend: Backend;
  readonly session: SessionRecord;

  constructor(backend: Backend, id: string, tenant = TEST_TENANT) {
    this.backend = backend;
    const session = backend.openSession(id, tenant);
    if (!(session instanceof SessionRecord)) throw new Error(`open ${id}: ${session.message}`);
    this.session = session;
  }

  /** Sends `body` as the session's next frame. */
  send(body: FrameBody): FrameOutcome {
    return this.backend.applyFrame(this.session, { number: this.session.lastFrame + 1, body });
  }

  /** Sends `body` under an explicit frame number (re-sends, gaps). */
  sendAs(number: number, body: FrameBody): FrameOutcome {
    return this.backend.applyFrame(this.session, { number, body });
  }

  /** Sends a call as the next frame; its result, which must be an applied one. */
  call(call: Call): CallResult {
    return applied(this.send({ kind: "call", call }));
  }

  /** Sends a store batch as the next frame; its result, which must be an applied one. */
  stores(batch: StoreBatch): CallResult {
    return applied(this.send({ kind: "stores", batch }));
  }

  /** A call that must succeed. */
  ok(call: Call): CallResult {
    const result = this.call(call);
    if (result.code !== ErrorCode.OK) {
      throw new Error(`${call.op} failed with code ${result.code}: ${result.message}`);
    }
    return result;
  }

  createContext(): number {
    return handleOf(this.ok({ op: "contextCreate" }));
  }

  alloc(context: number, sizeBytes: number): number {
    return handleOf(this.ok({ op: "boAlloc", context, sizeBytes }));
  }

  map(context: number, bo: number): void {
    this.ok({ op: "boMap", context, bo });
  }

  write(context: number, bo: number, offset: number, data: Uint8Array): void {
    this.ok({ op: "dmaWrite", context, bo, offset, data });
  }

  read(context: number, bo: number, offset: number, length: number): Uint8Array {
    const { output } = this.ok({ op: "dmaRead", context, bo, offset, length });
    if (output.kind !== "data") throw new Error(`dmaRead gave ${output.kind}`);
    return output.data;
  }

  store(context: number, bo: number, stores: readonly Store[]): void {
    const result = this.stores(storeBatch(context, bo, stores));
    if (result.code !== ErrorCode.OK) throw new Error(`stores failed: ${result.message}`);
  }
}

function applied(outcome: FrameOutcome): CallResult {
  if (outcome.kind !== "applied") {
    throw new Error(`frame ${outcome.kind}: ${outcome.result.message}`);
  }
  return outcome.result;
}

function handleOf(result: CallResult): number {
  if (result.output.kind !== "handle") throw new Error(`no handle in ${result.output.kind}`);
  return result.output.handle;
}
