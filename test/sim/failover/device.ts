// Each simulated node's device (issue #14): the GPU model's byte work behind the shipped
// ManualExecutor, run in order on the node's simulated process after a random latency and a
// random service time each — so a primary's replies wait for its device, and a standby's
// applied seq (its device's done seq) lags what it has received: a takeover then finds a
// backlog it must apply first. A paused process's device is paused with it (its timers wait);
// a crashed one's work dies with its memory.
import {
  type Backend,
  type DeviceExecutor,
  type DeviceOp,
  type ExecutorFactory,
  type ExecutorSink,
  ManualExecutor,
} from "@vgpu-ha/gpu-model";
import { SimRng } from "../rng.js";
import type { DeviceParams } from "./params.js";
import type { SimProcess } from "./process.js";

/** A device whose operations complete later, in order, on the simulated process's timers. */
class SimExecutor implements DeviceExecutor {
  private readonly manual = new ManualExecutor();
  /** When each held operation completes (process-local ms, non-decreasing). */
  private readonly due: number[] = [];
  private lastDueMs = Number.NEGATIVE_INFINITY;
  private sink: ExecutorSink | undefined;

  constructor(
    private readonly proc: SimProcess,
    private readonly rng: SimRng,
    private readonly params: DeviceParams,
  ) {}

  attach(sink: ExecutorSink): void {
    this.sink = sink;
    this.manual.attach(sink);
  }

  submit(index: number, op: DeviceOp): void {
    this.manual.submit(index, op);
    if (op.k === "hash") {
      // The shipped switchover and handover still take their digests synchronously
      // (computeDigest): asked for one, this device finishes its queue at once.
      // What completed inside submit told no listener (DeviceQueue): tell them just after.
      this.due.length = 0;
      this.manual.runAll();
      this.proc.setTimeout(0, () => this.sink?.progressed());
      return;
    }
    const now = this.proc.now();
    const { latencyMs, serviceMs, stallRate, stallMs } = this.params;
    const stall = stallRate > 0 && this.rng.chance(stallRate);
    const latency = stall ? this.rng.real(0, stallMs) : this.rng.real(latencyMs[0], latencyMs[1]);
    // Pipelined with a latency, busy for a service time per operation (under load it falls
    // behind), completing in order (a stalled operation holds up those behind it).
    const dueMs = Math.max(
      now + latency,
      this.lastDueMs + this.rng.real(serviceMs[0], serviceMs[1]),
    );
    this.lastDueMs = dueMs;
    this.due.push(dueMs);
    this.proc.setTimeout(dueMs - now, () => this.runUntil(dueMs));
  }

  /**
   * Runs, in order, every held operation due by `dueMs` (the firing timer's own time: timers
   * may fire late, and the process clock's rounding must not leave one behind).
   */
  private runUntil(dueMs: number): void {
    let n = 0;
    while (n < this.due.length && this.due[n]! <= dueMs) n++;
    if (n === 0) return;
    this.due.splice(0, n);
    this.manual.run(n);
  }

  peek(id: number) {
    return this.manual.peek(id);
  }

  close(): void {
    this.due.length = 0;
    this.manual.close();
  }

  /** The device fails as a hung or dead device thread does: it completes nothing more. */
  fail(reason: string): void {
    this.due.length = 0;
    this.manual.fail(reason);
  }
}

/** Makes a backend's simulated device fail; false when it runs inline (it cannot fail). */
export function failDevice(backend: Backend, reason: string): boolean {
  const executor = backend.device.queue.executor;
  if (!(executor instanceof SimExecutor)) return false;
  executor.fail(reason);
  return true;
}

/**
 * The executor factory a node's backends get while `proc` runs (undefined: the inline device
 * of before #14). Each backend's device draws its times from its own stream of `seed`.
 */
export function simDevice(
  proc: SimProcess,
  params: DeviceParams | undefined,
  seed: number,
): ExecutorFactory | undefined {
  if (params === undefined) return undefined;
  let devices = 0;
  return () => new SimExecutor(proc, new SimRng((seed + 0x9e37 * ++devices) >>> 0), params);
}
