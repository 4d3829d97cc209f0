// A hostile guest, run as its own process so its own work does not slow the test's normal
// guest: `node test/dist/support/hostile-guest.js ENDPOINT TENANT TOKEN`. It opens a session and
// floods it, without waiting for answers, with frames a node must refuse — allocations over the
// tenant's quota, DMAs above limits.maxDmaBytes, launches above device.maxKernelWork — while a
// second loop storms the node with session opens (each one closed again when it opens). It runs until its stdin closes, then prints
// one JSON line: the codes it was answered with, counted.
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { type Call, createClient, ErrorCode, encodeFrame, errorName, wire } from "@vgpu-ha/common";

const [endpoint, tenant, token] = process.argv.slice(2) as [string, string, string];
if (process.argv[5] === "storm") process.stdout.write("flooding\n");
const FRAMES_PER_MESSAGE = 64;
/** Session opens in flight at once. */
const STORM_LOOPS = 8;
/** Frames sent and not answered yet, at most (the node refuses more than its maxFramesInFlight). */
const WINDOW_FRAMES = 512;
const counts: Record<string, number> = {};
const count = (name: string, n = 1) => {
  counts[name] = (counts[name] ?? 0) + n;
};
let stopping = false;
const onStop: (() => void)[] = [];

const client = createClient(wire.Guest, endpoint, grpc.credentials.createInsecure(), {
  "grpc.max_send_message_length": 64 << 20,
  "grpc.max_receive_message_length": 64 << 20,
});

const open = (s: grpc.ClientDuplexStream<wire.GuestMessage, wire.NodeMessage>) =>
  s.write(create(wire.GuestMessageSchema, { kind: { case: "open", value: { tenant, token } } }));

/** After its context: three 256 KiB buffers (guest handles 1, 2, 3), 768 KiB of its quota. */
const setup = (context: number): Call[] =>
  [1, 2, 3].map(() => ({ op: "boAlloc", context, sizeBytes: 256 << 10 }));

/** The refused calls, in turn, naming its own context and buffers. */
function hostileCall(i: number, context: number): Call {
  switch (i % 3) {
    case 0:
      return { op: "boAlloc", context, sizeBytes: 1 << 30 }; // above any quota the test gives
    case 1:
      return { op: "dmaRead", context, bo: 1, offset: 0, length: (1 << 20) + 1 };
    default:
      // gemm 256×256×256 on buffers it fits: 2^24 work, above the test's maxKernelWork.
      return {
        op: "kernelLaunch",
        context,
        kernel: "gemm_f32",
        args: [
          { kind: "buffer", bo: 1 },
          { kind: "buffer", bo: 2 },
          { kind: "buffer", bo: 3 },
          { kind: "u32", value: 256 },
          { kind: "u32", value: 256 },
          { kind: "u32", value: 256 },
        ],
      };
  }
}

const CLOSE = create(wire.GuestMessageSchema, { kind: { case: "close", value: {} } });

const framesMessage = (first: number, calls: readonly Call[]) =>
  create(wire.GuestMessageSchema, {
    kind: {
      case: "frames",
      value: {
        frames: calls.map((call, k) =>
          encodeFrame({ number: first + k, body: { kind: "call", call } }),
        ),
      },
    },
  });

/** One session flooded with refused frames, the window kept full. */
function flood(): Promise<void> {
  return new Promise((resolve) => {
    const stream = client.session();
    let next = 5; // 1: contextCreate, 2-4: the buffers
    let answered = 0;
    let context = 0;
    let ready = false;
    const pump = () => {
      while (!stopping && ready && next - 1 - answered < WINDOW_FRAMES) {
        const calls = Array.from({ length: FRAMES_PER_MESSAGE }, (_, k) =>
          hostileCall(next + k, context),
        );
        stream.write(framesMessage(next, calls));
        next += calls.length;
      }
    };
    stream.on("data", (m: wire.NodeMessage) => {
      if (m.kind.case === "opened") {
        stream.write(framesMessage(1, [{ op: "contextCreate" }]));
      } else if (m.kind.case === "acks") {
        for (const r of m.kind.value.results) {
          count(errorName(r.result?.code ?? ErrorCode.OK));
          if (r.frame === 1n && r.result?.output.case === "handle") {
            context = r.result.output.value;
            stream.write(framesMessage(2, setup(context)));
          }
        }
        answered = Number(m.kind.value.ackedThrough);
        if (!ready && answered >= 4) {
          ready = true;
          process.stdout.write("flooding\n");
        }
        pump();
      } else if (m.kind.case === "error") {
        count(`session:${errorName(m.kind.value.code)}`);
      }
    });
    stream.on("error", () => resolve());
    stream.on("end", () => resolve());
    // Closed, so the next run of the test finds the tenant's sessions free again.
    onStop.push(() => stream.write(CLOSE));
    open(stream);
  });
}

/** Session opens, one after another without pause; each answer counted, each stream dropped. */
async function storm(): Promise<void> {
  while (!stopping) {
    await new Promise<void>((resolve) => {
      const stream = client.session();
      stream.on("data", (m: wire.NodeMessage) => {
        if (m.kind.case === "opened") {
          count("open:opened");
          stream.write(CLOSE); // open-close churn: the tenant's session count stays low
        } else if (m.kind.case === "error") {
          count(`open:${errorName(m.kind.value.code)}`);
        }
      });
      stream.on("error", () => resolve());
      stream.on("end", () => resolve());
      open(stream);
    });
  }
}

process.stdin.on("close", () => {
  stopping = true;
  for (const stop of onStop) stop();
});
process.stdin.resume();
const mode = process.argv[5] ?? "both";
await Promise.all([
  mode !== "storm" ? flood() : Promise.resolve(),
  ...(mode !== "flood" ? Array.from({ length: STORM_LOOPS }, () => storm()) : []),
]);
client.close();
process.stdout.write(`${JSON.stringify(counts)}\n`);
