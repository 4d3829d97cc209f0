// An executor whose device is still being opened: a WebGPU device takes a while to start
// (adapter, pipelines, golden vectors), but a backend asks for its executor synchronously
// (a new standby's replica, a snapshot being installed). Operations submitted meanwhile are held
// in order and handed over once the device is ready; if it cannot start, the queue is told the
// device failed (the node then steps down: device-watch.ts).
import type { DeviceExecutor, DeviceOp, ExecutorSink, VramBuffer } from "@vgpu-ha/gpu-model";

export class DeferredExecutor implements DeviceExecutor {
  readonly synchronous = false;
  private sink: ExecutorSink | undefined;
  private inner: DeviceExecutor | undefined;
  private held: { index: number; op: DeviceOp }[] = [];
  private closed = false;
  private failure: string | undefined;

  constructor(opening: Promise<DeviceExecutor>) {
    opening.then(
      (executor) => this.ready(executor),
      (e: unknown) => this.fail(`the device did not start: ${(e as Error)?.message ?? e}`),
    );
  }

  attach(sink: ExecutorSink): void {
    this.sink = sink;
    this.inner?.attach(sink);
    if (this.failure !== undefined) sink.failed(this.failure);
  }

  submit(index: number, op: DeviceOp): void {
    if (this.closed || this.failure !== undefined) return;
    if (this.inner) this.inner.submit(index, op);
    else this.held.push({ index, op });
  }

  peek(id: number): VramBuffer {
    if (this.inner === undefined) throw new Error("the device is still starting: no live bytes");
    return this.inner.peek(id);
  }

  close(): void {
    this.closed = true;
    this.held = [];
    this.inner?.close();
  }

  private ready(executor: DeviceExecutor): void {
    if (this.closed) {
      executor.close();
      return;
    }
    this.inner = executor;
    if (this.sink) executor.attach(this.sink);
    const held = this.held;
    this.held = [];
    for (const { index, op } of held) executor.submit(index, op);
  }

  private fail(reason: string): void {
    if (this.closed) return;
    this.failure = reason;
    this.held = [];
    this.sink?.failed(reason);
  }
}
