// Runs device operations on any DeviceExecutor and awaits their results: the golden vectors at
// start and the GPU tests use it (a node goes through gpu-model's DeviceQueue instead).
import type { DeviceExecutor, DeviceOp, OpResult } from "@vgpu-ha/gpu-model";

export class ExecutorDriver {
  private readonly executor: DeviceExecutor;
  private next = 1;
  private readonly waiting = new Map<number, (result: OpResult) => void>();
  private failure: string | undefined;
  private readonly failed: ((reason: string) => void)[] = [];

  constructor(executor: DeviceExecutor) {
    this.executor = executor;
    executor.attach({
      complete: (index, result) => {
        const resolve = this.waiting.get(index);
        this.waiting.delete(index);
        resolve?.(result);
      },
      progressed: () => {},
      failed: (reason) => {
        this.failure = reason;
        for (const reject of this.failed.splice(0)) reject(reason);
      },
    });
  }

  /** Submits the operations in this turn; resolves with every result, in order. */
  run(ops: readonly DeviceOp[]): Promise<OpResult[]> {
    if (this.failure !== undefined) return Promise.reject(new Error(this.failure));
    const results = ops.map((op) => {
      const index = this.next++;
      const result = new Promise<OpResult>((resolve) => this.waiting.set(index, resolve));
      this.executor.submit(index, op);
      return result;
    });
    const failure = new Promise<never>((_, reject) =>
      this.failed.push((r) => reject(new Error(r))),
    );
    failure.catch(() => {});
    return Promise.race([Promise.all(results), failure]);
  }
}
