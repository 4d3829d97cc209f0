// A guest session: one gRPC stream to the node, frames pipelined (many in flight, packed
// several per message), results delivered per frame, typed calls on top.
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  type Call,
  type CallResult,
  createClient,
  decodeResult,
  ErrorCode,
  encodeFrame,
  type KernelArg,
  type ServiceClient,
  type StoreBatch,
  VgpuError,
  wire,
} from "@vgpu-ha/common";
import { SessionClosedError } from "./errors.js";
import { FrameWindow } from "./frame-window.js";
import { MappedBuffer } from "./mapped-buffer.js";

export interface SessionOptions {
  /** host:port of the node's guest API. */
  readonly endpoint: string;
  readonly tenant: string;
  readonly token: string;
  /** Frames sent but not yet acknowledged, at most (the node's guest.maxFramesInFlight or less). */
  readonly maxFramesInFlight?: number;
  /** Frames packed into one gRPC message, at most. */
  readonly maxFramesPerMessage?: number;
  readonly maxMessageBytes?: number;
}

type Duplex = grpc.ClientDuplexStream<wire.GuestMessage, wire.NodeMessage>;

export class Session {
  readonly id: string;
  readonly nodeId: string;
  /** Highest epoch seen in any reply. */
  epoch: number;
  private readonly client: ServiceClient<typeof wire.Guest>;
  private readonly stream: Duplex;
  private readonly window: FrameWindow;
  private readonly maxInFlight: number;
  private readonly maxPerMessage: number;
  private readonly mapped = new Set<MappedBuffer>();
  private flushScheduled = false;
  private closedError: Error | undefined;

  private constructor(
    init: { id: string; nodeId: string; epoch: number; lastFrame: number },
    client: ServiceClient<typeof wire.Guest>,
    stream: Duplex,
    options: SessionOptions,
  ) {
    this.id = init.id;
    this.nodeId = init.nodeId;
    this.epoch = init.epoch;
    this.client = client;
    this.stream = stream;
    this.window = new FrameWindow(init.lastFrame);
    this.maxInFlight = options.maxFramesInFlight ?? 1024;
    this.maxPerMessage = options.maxFramesPerMessage ?? 256;
    stream.on("data", (m: wire.NodeMessage) => this.onMessage(m));
    stream.on("error", (e: Error) =>
      this.fail(new SessionClosedError(ErrorCode.INTERNAL, e.message)),
    );
    stream.on("end", () =>
      this.fail(new SessionClosedError(ErrorCode.NOT_PRIMARY, "stream ended")),
    );
  }

  /** Opens a new session on the node. */
  static async open(options: SessionOptions): Promise<Session> {
    const maxBytes = options.maxMessageBytes ?? 64 * 1024 * 1024;
    const client = createClient(wire.Guest, options.endpoint, grpc.credentials.createInsecure(), {
      "grpc.max_receive_message_length": maxBytes,
      "grpc.max_send_message_length": maxBytes,
    });
    const stream = client.session();
    stream.write(
      create(wire.GuestMessageSchema, {
        kind: { case: "open", value: { tenant: options.tenant, token: options.token } },
      }),
    );
    const opened = await new Promise<wire.Opened>((resolve, reject) => {
      const onData = (m: wire.NodeMessage) => {
        cleanup();
        if (m.kind.case === "opened") resolve(m.kind.value);
        else if (m.kind.case === "error")
          reject(new SessionClosedError(m.kind.value.code, m.kind.value.message));
        else reject(new SessionClosedError(ErrorCode.MALFORMED, `unexpected ${m.kind.case}`));
      };
      const onError = (e: Error) => {
        cleanup();
        reject(new SessionClosedError(ErrorCode.NOT_PRIMARY, e.message));
      };
      const cleanup = () => {
        stream.off("data", onData);
        stream.off("error", onError);
      };
      stream.on("data", onData);
      stream.on("error", onError);
    }).catch((e: unknown) => {
      stream.on("error", () => undefined); // the cancel below reports CANCELLED; nobody listens
      stream.cancel();
      client.close();
      throw e;
    });
    return new Session(
      {
        id: opened.sessionId,
        nodeId: opened.nodeId,
        epoch: Number(opened.epoch),
        lastFrame: Number(opened.lastFrame),
      },
      client,
      stream,
      options,
    );
  }

  // ---- raw frames ----

  /**
   * Sends one call; resolves with its result whatever the code. The call is checked and its
   * data copied now, so the caller may reuse its buffers at once.
   */
  call(call: Call): Promise<CallResult> {
    this.flushStores();
    const owned: Call =
      call.op === "dmaWrite" ? { ...call, data: Uint8Array.prototype.slice.call(call.data) } : call;
    return this.enqueue({ kind: "call", call: owned });
  }

  /** Sends one store batch as a frame (after any pending mapped-buffer stores); its result. */
  storeBatch(batch: StoreBatch): Promise<CallResult> {
    this.flushStores();
    return this.enqueue({ kind: "stores", batch });
  }

  private enqueue(body: Parameters<FrameWindow["push"]>[0]): Promise<CallResult> {
    if (this.closedError) return Promise.reject(this.closedError);
    try {
      encodeFrame({ number: 1, body }); // refuses what cannot go on the wire, now
    } catch (e) {
      return Promise.reject(new VgpuError(ErrorCode.MALFORMED, (e as Error).message));
    }
    const result = this.window.push(body);
    this.scheduleSend();
    return result;
  }

  private scheduleSend(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      this.flushStores();
      this.send();
    });
  }

  private send(): void {
    for (;;) {
      const room = Math.min(this.maxPerMessage, this.maxInFlight - this.window.inFlight);
      if (room <= 0) return;
      const frames = this.window.takeUnsent(room);
      if (frames.length === 0) return;
      this.stream.write(
        create(wire.GuestMessageSchema, {
          kind: { case: "frames", value: { frames: frames.map(encodeFrame) } },
        }),
      );
    }
  }

  private onMessage(m: wire.NodeMessage): void {
    switch (m.kind.case) {
      case "acks": {
        const epoch = Number(m.kind.value.epoch);
        if (epoch < this.epoch) return; // a reply from an older epoch is never believed
        this.epoch = epoch;
        for (const r of m.kind.value.results) {
          this.window.settle(Number(r.frame), decodeResult(r.result));
        }
        this.send();
        return;
      }
      case "error":
        this.fail(new SessionClosedError(m.kind.value.code, m.kind.value.message));
        return;
      case "closed":
        this.fail(new SessionClosedError(ErrorCode.OK, "session closed"));
        return;
      default:
        return;
    }
  }

  private fail(error: Error): void {
    if (this.closedError) return;
    this.closedError = error;
    this.window.failAll(error);
    this.client.close();
  }

  // ---- typed calls: resolve with the output, reject with a VgpuError ----

  private async expectOk(call: Call): Promise<CallResult> {
    const result = await this.call(call);
    if (result.code !== ErrorCode.OK) throw new VgpuError(result.code, result.message);
    return result;
  }

  private async expectHandle(call: Call): Promise<number> {
    const r = await this.expectOk(call);
    if (r.output.kind !== "handle") throw new VgpuError(ErrorCode.MALFORMED, "no handle in reply");
    return r.output.handle;
  }

  createContext(): Promise<number> {
    return this.expectHandle({ op: "contextCreate" });
  }

  async destroyContext(context: number): Promise<void> {
    await this.expectOk({ op: "contextDestroy", context });
  }

  allocBo(context: number, sizeBytes: number): Promise<number> {
    return this.expectHandle({ op: "boAlloc", context, sizeBytes });
  }

  async freeBo(context: number, bo: number): Promise<void> {
    await this.expectOk({ op: "boFree", context, bo });
  }

  async dmaWrite(context: number, bo: number, offset: number, data: Uint8Array): Promise<void> {
    await this.expectOk({ op: "dmaWrite", context, bo, offset, data });
  }

  async dmaRead(context: number, bo: number, offset: number, length: number): Promise<Uint8Array> {
    const r = await this.expectOk({ op: "dmaRead", context, bo, offset, length });
    if (r.output.kind !== "data") throw new VgpuError(ErrorCode.MALFORMED, "no data in reply");
    return r.output.data;
  }

  async copy(
    context: number,
    src: { bo: number; offset: number },
    dst: { bo: number; offset: number },
    length: number,
  ): Promise<void> {
    await this.expectOk({
      op: "boCopy",
      context,
      srcBo: src.bo,
      srcOffset: src.offset,
      dstBo: dst.bo,
      dstOffset: dst.offset,
      length,
    });
  }

  async launch(context: number, kernel: string, args: readonly KernelArg[]): Promise<void> {
    await this.expectOk({ op: "kernelLaunch", context, kernel, args });
  }

  async fence(context: number): Promise<number> {
    const r = await this.expectOk({ op: "fence", context });
    if (r.output.kind !== "fence") throw new VgpuError(ErrorCode.MALFORMED, "no fence in reply");
    return r.output.value;
  }

  /** Maps a buffer and returns an object written like memory; writes become store frames. */
  async map(context: number, bo: number, sizeBytes: number): Promise<MappedBuffer> {
    await this.expectOk({ op: "boMap", context, bo });
    const mapped = new MappedBuffer(this, context, bo, sizeBytes);
    this.mapped.add(mapped);
    return mapped;
  }

  async unmap(mapped: MappedBuffer): Promise<void> {
    await mapped.flush();
    this.mapped.delete(mapped);
    await this.expectOk({ op: "boUnmap", context: mapped.context, bo: mapped.bo });
  }

  /** Called by mapped buffers when they hold stores: send them soon. */
  storesPending(): void {
    this.scheduleSend();
  }

  /** Turns every mapped buffer's pending stores into frames, before anything after them. */
  private flushStores(): void {
    for (const m of this.mapped) m.emit();
  }

  /** Resolves when every frame so far is acknowledged; throws a mapped buffer's first error. */
  async drain(): Promise<void> {
    this.flushStores();
    await this.window.settled();
    if (this.closedError) throw this.closedError;
    for (const m of this.mapped) await m.flush();
  }

  /** Closes the session: the node destroys its contexts. */
  async close(): Promise<void> {
    if (this.closedError) return;
    this.flushStores();
    await this.window.settled(); // every frame answered before the Close
    if (this.closedError) return;
    const done = new Promise<void>((resolve) => {
      this.stream.on("data", (m: wire.NodeMessage) => {
        if (m.kind.case === "closed") resolve();
      });
      this.stream.on("end", () => resolve());
      this.stream.on("error", () => resolve());
    });
    this.stream.write(create(wire.GuestMessageSchema, { kind: { case: "close", value: {} } }));
    this.stream.end();
    await done;
    this.fail(new SessionClosedError(ErrorCode.OK, "session closed"));
  }
}

export const buf = (bo: number): KernelArg => ({ kind: "buffer", bo });
export const u32 = (value: number): KernelArg => ({ kind: "u32", value: value >>> 0 });
export const i32 = (value: number): KernelArg => ({ kind: "i32", value: value | 0 });
export const f32 = (value: number): KernelArg => ({ kind: "f32", value: Math.fround(value) });
