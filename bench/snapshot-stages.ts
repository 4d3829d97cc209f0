// What each stage of one snapshot chunk costs, per MiB of pages, in process (issue #15): the
// primary's device reading a chunk (CoreSnapshot: zero-page test and copy out of VRAM into the
// pages' wire layout), the pull's encoding (encodePulledChunk around that layout; and, for
// reference, with the pages copied as before), grpc-js's framing copy (5-byte prefix), the
// standby's reassembly of the HTTP/2 DATA frames (Buffer.concat of 16 KiB pieces, as grpc-js's
// stream decoder does), its decoding (fromBinary + decodePrimaryMessage), the copy that took
// pages to the device thread before (a pulled chunk now moves its buffer), and the device's
// write into VRAM. Then the gRPC loopback itself:
// a server stream of pre-encoded 1 MiB messages to a client with a large receive window, both
// ends in this one process (so its CPU is both ends' together). Figures are CPU ms of this
// process (process.cpuUsage) per MiB, medians over rounds: valid on a shared box.
//   npm run bench -- snapshot-stages
import net from "node:net";
import { performance } from "node:perf_hooks";
import { Worker } from "node:worker_threads";
import { fromBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { decodePrimaryMessage, encodePulledChunk, type SnapshotChunk, wire } from "@vgpu-ha/common";
import { type ChunkResult, DeviceCore } from "@vgpu-ha/gpu-model";
import { type Metric, publish } from "./report.js";
import { median } from "./timing.js";

const MiB = 2 ** 20;
const CHUNK_BYTES = MiB;
const BUFFER_BYTES = 64 * MiB;
const ROUNDS = 5;
const FRAME_BYTES = 16 * 1024;
const GRPC_MESSAGES = 256;

function filledCore(): DeviceCore {
  const core = new DeviceCore();
  core.execute({ k: "alloc", id: 7, size: BUFFER_BYTES });
  core.buffer(7).bytes.fill(0x5a);
  return core;
}

/** Every chunk of one 64 MiB buffer, read by the device core. */
function readChunks(core: DeviceCore, snap: number): ChunkResult[] {
  core.execute({ k: "snapBegin", snap, buffers: [{ context: 1, bo: 1, id: 7 }] });
  const out: ChunkResult[] = [];
  for (;;) {
    const r = core.execute({ k: "snapChunk", snap, maxBytes: CHUNK_BYTES }) as ChunkResult;
    out.push(r);
    if (r.last) break;
  }
  core.execute({ k: "snapEnd", snap });
  return out;
}

const chunkOf = (r: ChunkResult, index: number): SnapshotChunk => ({
  snapshotId: 3,
  atSeq: 1000,
  index,
  last: r.last,
  meta: undefined,
  pages: r.pages.map((p) => ({ ...p })),
});

function frame(message: Uint8Array): Buffer {
  const output = Buffer.allocUnsafe(message.byteLength + 5);
  output.writeUInt8(0, 0);
  output.writeUInt32BE(message.byteLength, 1);
  output.set(message, 5);
  return output;
}

/** The framed message cut as HTTP/2 DATA frames arrive, then joined as grpc-js joins them. */
function reassemble(framed: Buffer): Buffer {
  const pieces: Buffer[] = [];
  for (let at = 0; at < framed.byteLength; at += FRAME_BYTES) {
    pieces.push(framed.subarray(at, at + FRAME_BYTES));
  }
  return Buffer.concat(pieces, framed.byteLength);
}

interface StageTimes {
  deviceRead: number;
  encode: number;
  encodeCopy: number;
  grpcFrame: number;
  reassemble: number;
  decode: number;
  moveCopy: number;
  vramWrite: number;
}

/** Runs `fn`, adding its CPU ms to `times[stage]`. */
function timed<T>(times: StageTimes, stage: keyof StageTimes, fn: () => T): T {
  const start = process.cpuUsage();
  const out = fn();
  const used = process.cpuUsage(start);
  times[stage] += (used.user + used.system) / 1000;
  return out;
}

/** One chunk at a time through every stage, as the pipeline runs (each buffer dies after). */
function stagesRound(core: DeviceCore, sink: DeviceCore, snap: number): StageTimes {
  const t: StageTimes = {
    deviceRead: 0,
    encode: 0,
    encodeCopy: 0,
    grpcFrame: 0,
    reassemble: 0,
    decode: 0,
    moveCopy: 0,
    vramWrite: 0,
  };
  core.execute({ k: "snapBegin", snap, buffers: [{ context: 1, bo: 1, id: 7 }] });
  for (let index = 1; ; index++) {
    const op = { k: "snapChunk", snap, maxBytes: CHUNK_BYTES } as const;
    const r = timed(t, "deviceRead", () => core.execute(op) as ChunkResult);
    timed(t, "encodeCopy", () => encodePulledChunk(5, chunkOf(r, index)));
    const encoded = timed(t, "encode", () =>
      encodePulledChunk(5, { ...chunkOf(r, index), pagesWire: r.wire! }),
    );
    const framed = timed(t, "grpcFrame", () => frame(encoded));
    const joined = timed(t, "reassemble", () => reassemble(framed));
    const chunk = timed(t, "decode", () => {
      const m = decodePrimaryMessage(fromBinary(wire.PrimaryMessageSchema, joined.subarray(5)));
      if (m instanceof Error || m.kind !== "snapshot") throw new Error("decode failed");
      return m.chunk;
    });
    timed(t, "moveCopy", () => chunk.pages.map((p) => new Uint8Array(p.data)));
    timed(t, "vramWrite", () => {
      const writes = chunk.pages.map((p) => ({ id: 9, at: p.firstPage * 4096, data: p.data }));
      sink.execute({ k: "pages", writes });
    });
    if (r.last) break;
  }
  core.execute({ k: "snapEnd", snap });
  return t;
}

const PASS_THROUGH: grpc.ServiceDefinition = {
  pull: {
    path: "/bench.Stages/Pull",
    requestStream: false,
    responseStream: true,
    requestSerialize: (b: Buffer) => b,
    requestDeserialize: (b: Buffer) => b,
    responseSerialize: (b: Buffer) => b,
    responseDeserialize: (b: Buffer) => b,
  },
};

interface PerMiB {
  readonly cpuMs: number;
  readonly wallMs: number;
}

/** CPU and wall ms per MiB of `transfer`, which resolves with the bytes it moved. */
async function perMiB(transfer: () => Promise<number>): Promise<PerMiB> {
  const start = process.cpuUsage();
  const startMs = performance.now();
  const bytes = await transfer();
  const used = process.cpuUsage(start);
  const mib = bytes / MiB;
  return {
    cpuMs: (used.user + used.system) / 1000 / mib,
    wallMs: (performance.now() - startMs) / mib,
  };
}

/** Writes `count` times `message` to `w`, waiting for drain when it says so, then ends it. */
function writeAll(
  w: { write(b: Uint8Array): boolean; once(e: "drain", f: () => void): unknown; end(): unknown },
  message: Uint8Array,
): void {
  let sent = 0;
  const more = () => {
    while (sent < GRPC_MESSAGES) {
      sent++;
      if (!w.write(message)) {
        w.once("drain", more);
        return;
      }
    }
    w.end();
  };
  more();
}

/** CPU ms per MiB of a loopback server stream of pre-encoded 1 MiB messages, both ends. */
async function grpcLoopbackMsPerMiB(message: Uint8Array): Promise<PerMiB> {
  const server = new grpc.Server({ "grpc.max_send_message_length": 4 * MiB });
  server.addService(PASS_THROUGH, {
    pull: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      writeAll(call, Buffer.from(message.buffer, message.byteOffset, message.byteLength));
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  );
  const Client = grpc.makeGenericClientConstructor(PASS_THROUGH, "Stages");
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    "grpc.max_receive_message_length": 4 * MiB,
    "grpc-node.flow_control_window": 64 * MiB,
  }) as unknown as grpc.Client & { pull(r: Buffer): grpc.ClientReadableStream<Buffer> };
  try {
    return await perMiB(
      () =>
        new Promise<number>((resolve, reject) => {
          let bytes = 0;
          const call = client.pull(Buffer.alloc(0));
          call.on("data", (b: Buffer) => {
            bytes += b.byteLength;
          });
          call.on("end", () => resolve(bytes));
          call.on("error", reject);
        }),
    );
  } finally {
    client.close();
    server.forceShutdown();
  }
}

/** CPU ms per MiB of the same bytes over a plain loopback TCP socket, both ends. */
async function rawLoopbackMsPerMiB(message: Uint8Array): Promise<PerMiB> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  const total = GRPC_MESSAGES * message.byteLength;
  try {
    return await perMiB(
      () =>
        new Promise<number>((resolve, reject) => {
          server.once("connection", (sock) => writeAll(sock, message));
          const client = net.connect(port, "127.0.0.1");
          let bytes = 0;
          client.on("data", (b: Buffer) => {
            bytes += b.byteLength;
          });
          client.on("end", () => (bytes === total ? resolve(bytes) : reject(new Error("short"))));
          client.on("error", reject);
        }),
    );
  } finally {
    server.close();
  }
}

const ECHO = `require("node:worker_threads").parentPort.on("message", function () { this.postMessage(0); });`;

/**
 * Main-thread CPU ms per MiB of handing received 1 MiB messages (joined as grpc-js joins them)
 * to a worker thread: moved (their buffer transferred) or copied first (then the copy moved).
 */
async function handOverMsPerMiB(message: Uint8Array, copy: boolean): Promise<number> {
  const worker = new Worker(ECHO, { eval: true });
  try {
    let cpu = 0;
    for (let i = 0; i < GRPC_MESSAGES / 4; i++) {
      const joined = reassemble(frame(message));
      const view = joined.subarray(5);
      const answered = new Promise((resolve) => worker.once("message", resolve));
      const start = process.cpuUsage();
      const data = copy ? new Uint8Array(view) : view;
      worker.postMessage({ k: "pages", writes: [{ id: 9, at: 0, data }] }, [
        data.buffer as ArrayBuffer,
      ]);
      const used = process.cpuUsage(start);
      cpu += (used.user + used.system) / 1000;
      await answered;
    }
    return cpu / ((GRPC_MESSAGES / 4) * (message.byteLength / MiB));
  } finally {
    await worker.terminate();
  }
}

export async function runSnapshotStages(): Promise<void> {
  const core = filledCore();
  const sink = new DeviceCore();
  sink.execute({ k: "alloc", id: 9, size: BUFFER_BYTES });
  const rounds: StageTimes[] = [];
  for (let r = 0; r < ROUNDS + 1; r++) {
    const t = stagesRound(core, sink, r + 1);
    if (r > 0) rounds.push(t); // the first round warms the code up
  }
  const perMiB = (k: keyof StageTimes) => median(rounds.map((t) => t[k])) / (BUFFER_BYTES / MiB);
  const sample = encodePulledChunk(5, chunkOf(readChunks(core, 99)[0]!, 1));
  const loop: PerMiB[] = [];
  const moved: number[] = [];
  const copied: number[] = [];
  for (let r = 0; r < 3; r++) {
    moved.push(await handOverMsPerMiB(sample, false));
    copied.push(await handOverMsPerMiB(sample, true));
  }
  const raw: PerMiB[] = [];
  for (let r = 0; r < 3; r++) {
    loop.push(await grpcLoopbackMsPerMiB(sample));
    raw.push(await rawLoopbackMsPerMiB(sample));
  }
  const unit = "CPU ms per MiB";
  const metrics: Metric[] = [
    {
      name: "primary_device_read_ms_per_mib",
      value: perMiB("deviceRead"),
      unit: `${unit} (device thread: zero test, copy into the wire layout)`,
    },
    {
      name: "primary_encode_ms_per_mib",
      value: perMiB("encode"),
      unit: `${unit} (leading fields into the room: no copy)`,
    },
    {
      name: "primary_encode_copy_ms_per_mib",
      value: perMiB("encodeCopy"),
      unit: `${unit} (the same message with the pages copied: before)`,
    },
    { name: "primary_grpc_frame_ms_per_mib", value: perMiB("grpcFrame"), unit },
    { name: "standby_reassemble_ms_per_mib", value: perMiB("reassemble"), unit },
    { name: "standby_decode_ms_per_mib", value: perMiB("decode"), unit },
    {
      name: "standby_move_copy_ms_per_mib",
      value: perMiB("moveCopy"),
      unit: `${unit} (copy for the device thread: before; a pulled chunk now moves its buffer)`,
    },
    {
      name: "standby_to_device_moved_ms_per_mib",
      value: median(moved),
      unit: `${unit} (postMessage, the receive buffer transferred: now)`,
    },
    {
      name: "standby_to_device_copied_ms_per_mib",
      value: median(copied),
      unit: `${unit} (postMessage of a copy, transferred: before)`,
    },
    {
      name: "standby_vram_write_ms_per_mib",
      value: perMiB("vramWrite"),
      unit: `${unit} (device thread)`,
    },
    {
      name: "grpc_loopback_cpu_ms_per_mib",
      value: median(loop.map((l) => l.cpuMs)),
      unit: `${unit} (both ends, one process)`,
    },
    {
      name: "grpc_loopback_wall_ms_per_mib",
      value: median(loop.map((l) => l.wallMs)),
      unit: "ms per MiB (wall, one process)",
    },
    {
      name: "raw_loopback_cpu_ms_per_mib",
      value: median(raw.map((l) => l.cpuMs)),
      unit: `${unit} (both ends, one process)`,
    },
    {
      name: "raw_loopback_wall_ms_per_mib",
      value: median(raw.map((l) => l.wallMs)),
      unit: "ms per MiB (wall, one process)",
    },
  ];
  publish({
    name: "snapshot-stages",
    metrics,
    notes: [
      `per MiB of 1 MiB chunks of a ${BUFFER_BYTES / MiB} MiB non-zero buffer, CPU time of this process, median of ${ROUNDS} rounds; grpc loopback: ${GRPC_MESSAGES} pre-encoded chunk messages over a server stream to a client with a 64 MiB window, median of 3`,
    ],
  });
}
