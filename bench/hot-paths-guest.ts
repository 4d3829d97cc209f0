// The primary's per-frame work in process, without gRPC: guest messages decoded from bytes
// (fromBinary, as grpc-js's deserializer does) into the guest service of a standalone node
// (@vgpu-ha/primary/testing: the real GuestService, sequencer and backend, inline device),
// and every reply encoded (toBinary, as the serializer does). CPU µs per frame of this process,
// so a busy machine slows the wall clock, not the figure.
//   fences   8 sessions, messages of 64 fence frames
//   dma      one session, messages of one 64 KiB dmaWrite each (16 at a time), round a 64 MiB
//            buffer
// Each build encodes and decodes with its own protobuf-es (GuestBuild.protobuf): one instance
// shared by both builds would see both builds' traffic and favour neither fairly.

const SESSIONS = 8;
const FENCES_PER_MESSAGE = 64;
const FENCE_MESSAGES_PER_ROUND = 400; // 25,600 frames
const DMA_BYTES = 64 * 1024;
const DMA_BO_BYTES = 64 * 2 ** 20;
const DMA_MESSAGES_PER_ROUND = 1024; // 64 MiB
/** Messages sent before the node is let to serve them (the guest bench keeps 16 outstanding). */
const DMA_WINDOW = 16;
const MiB = 2 ** 20;

type Common = typeof import("@vgpu-ha/common");
type PrimaryTesting = typeof import("@vgpu-ha/primary/testing");

export interface GuestBuild {
  readonly common: Common;
  readonly primary: PrimaryTesting;
  readonly protobuf: typeof import("@bufbuild/protobuf");
}

type Harness = ReturnType<PrimaryTesting["guestHarness"]>;
type Stream = ReturnType<Harness["connect"]>;
type Call = Parameters<Common["encodeCall"]>[0];

const TENANT = { name: "bench", token: "bench-token-0001" };

function harnessOf(b: GuestBuild): Harness {
  return b.primary.guestHarness({
    backend: {
      device: { seed: 1, vramBytes: 256 * MiB, maxBoBytes: DMA_BO_BYTES, maxKernelWork: 2 ** 28 },
      tenants: new Map([["bench", { vramBytes: 256 * MiB, bos: 1000, contexts: 64 }]]),
      session: { replyCacheFrames: 4096, replyCacheBytes: 64 * MiB },
      maxDmaBytes: 2 ** 24,
      maxStoresPerBatch: 65536,
      trackMmio: false,
    },
    tenants: [TENANT],
    maxFramesInFlight: 1 << 20,
    standalone: true,
  } as Parameters<PrimaryTesting["guestHarness"]>[0]);
}

/** A guest of the harness: sends frames as encoded bytes, encodes (and drops) the replies. */
class Guest {
  private readonly b: GuestBuild;
  private readonly h: Harness;
  private readonly stream: Stream;
  private next = 1;

  constructor(b: GuestBuild, h: Harness) {
    this.b = b;
    this.h = h;
    this.stream = h.connect();
    this.sendBytes(
      this.bytes(
        b.protobuf.create(b.common.wire.GuestMessageSchema, {
          kind: { case: "open", value: { tenant: TENANT.name, token: TENANT.token } },
        }),
      ),
    );
  }

  /** The encoded message of `calls` as this guest's next frames. */
  frames(calls: readonly Call[]): Uint8Array {
    const { wire, encodeFrame } = this.b.common;
    const frames = calls.map((call) =>
      encodeFrame({ number: this.next++, body: { kind: "call", call } }),
    );
    return this.bytes(
      this.b.protobuf.create(wire.GuestMessageSchema, {
        kind: { case: "frames", value: { frames } },
      }),
    );
  }

  sendBytes(bytes: Uint8Array): void {
    this.stream.send(this.b.protobuf.fromBinary(this.b.common.wire.GuestMessageSchema, bytes));
  }

  /** Encodes what the node wrote since the last call, as the gRPC serializer would. */
  drain(): void {
    const { toBinary } = this.b.protobuf;
    for (const m of this.stream.written) toBinary(this.b.common.wire.NodeMessageSchema, m);
    this.stream.written.length = 0;
  }

  /** The last result's output handle (after settled()). */
  async call(call: Call): Promise<number> {
    this.sendBytes(this.frames([call]));
    await this.h.settled();
    const last = this.stream.written.at(-1)?.kind;
    this.drain();
    if (last?.case !== "acks") throw new Error(`no acks: ${last?.case}`);
    const r = last.value.results.at(-1)?.result;
    if (r?.code !== 0) throw new Error(`${call.op}: ${r?.message}`);
    return r.output.case === "handle" ? r.output.value : 0;
  }

  private bytes(m: Parameters<GuestBuild["protobuf"]["toBinary"]>[1]): Uint8Array {
    return this.b.protobuf.toBinary(this.b.common.wire.GuestMessageSchema, m as never);
  }
}

/** CPU seconds of this process while `run` runs (and settles). */
async function cpuSeconds(run: () => Promise<void>): Promise<number> {
  const start = process.cpuUsage();
  await run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}

/** A standalone node's log drops entries once served (primary-driver afterGuestMessage). */
function dropLog(h: Harness): void {
  h.sequencer.log.release(h.sequencer.log.lastSeq, 0);
}

/** Fence frames from 8 sessions: a round's CPU µs per frame. */
export async function guestFencesRound(b: GuestBuild): Promise<() => Promise<number>> {
  const h = harnessOf(b);
  const guests = Array.from({ length: SESSIONS }, () => new Guest(b, h));
  const contexts: number[] = [];
  for (const g of guests) contexts.push(await g.call({ op: "contextCreate" }));
  const messages = (n: number) =>
    Array.from({ length: n }, (_, i) => {
      const s = i % SESSIONS;
      const fence: Call = { op: "fence", context: contexts[s]! };
      return { g: guests[s]!, bytes: guests[s]!.frames(Array(FENCES_PER_MESSAGE).fill(fence)) };
    });
  const run = async (n: number) => {
    const batch = messages(n); // encoded outside the measured stretch, as a client would
    const cpu = await cpuSeconds(async () => {
      for (const m of batch) m.g.sendBytes(m.bytes);
      await h.settled();
      for (const g of guests) g.drain();
      dropLog(h);
    });
    return (cpu / (n * FENCES_PER_MESSAGE)) * 1e6;
  };
  await run(FENCE_MESSAGES_PER_ROUND); // warm-up; fills the reply caches
  return () => run(FENCE_MESSAGES_PER_ROUND);
}

/** 64 KiB dmaWrites from one session: a round's CPU µs per frame. */
export async function guestDmaRound(b: GuestBuild): Promise<() => Promise<number>> {
  const h = harnessOf(b);
  const g = new Guest(b, h);
  const context = await g.call({ op: "contextCreate" });
  const bo = await g.call({ op: "boAlloc", context, sizeBytes: DMA_BO_BYTES });
  const data = new Uint8Array(DMA_BYTES).fill(0xa5);
  const slots = DMA_BO_BYTES / DMA_BYTES;
  const run = async (n: number) => {
    const batch = Array.from({ length: n }, (_, i) =>
      g.frames([{ op: "dmaWrite", context, bo, offset: (i % slots) * DMA_BYTES, data }]),
    );
    const cpu = await cpuSeconds(async () => {
      for (let i = 0; i < n; i += DMA_WINDOW) {
        for (const bytes of batch.slice(i, i + DMA_WINDOW)) g.sendBytes(bytes);
        await h.settled();
        g.drain();
        dropLog(h);
      }
    });
    return (cpu / n) * 1e6;
  };
  await run(DMA_MESSAGES_PER_ROUND); // warm-up: every page of the buffer written once
  return () => run(DMA_MESSAGES_PER_ROUND);
}

/**
 * The guest's side of a 64 KiB dmaWrite: its message (one frame, as the client library sends
 * it) encoded by encodeGuestFrames and, for comparison, by the generated code's toBinary, which
 * the library used before. CPU µs per message of each, one round.
 */
export function guestDmaEncodeRound(b: GuestBuild): () => { leanUs: number; toBinaryUs: number } {
  const { wire, encodeFrame, encodeGuestFrames } = b.common;
  const data = new Uint8Array(DMA_BYTES).fill(0xa5);
  const n = DMA_MESSAGES_PER_ROUND;
  const frames = Array.from({ length: n }, (_, i) => [
    encodeFrame({
      number: i + 1,
      body: {
        kind: "call",
        call: { op: "dmaWrite", context: 1, bo: 1, offset: (i % 1024) * DMA_BYTES, data },
      },
    }),
  ]);
  const usPer = (encode: (f: (typeof frames)[number]) => Uint8Array) => {
    const start = process.cpuUsage();
    for (const f of frames) encode(f);
    const used = process.cpuUsage(start);
    return (used.user + used.system) / n;
  };
  const generic = (f: (typeof frames)[number]) =>
    b.protobuf.toBinary(
      wire.GuestMessageSchema,
      b.protobuf.create(wire.GuestMessageSchema, {
        kind: { case: "frames", value: { frames: f } },
      }),
    );
  return () => ({ leanUs: usPer(encodeGuestFrames), toBinaryUs: usPer(generic) });
}
