// A hostile guest, run as its own process so its own work does not slow the test's normal
// guest: `node test/dist/support/hostile-guest.js ENDPOINT TENANT TOKEN [flood|storm|both]`.
// It opens a session, makes a context and three buffers, and says `ready`. On a line `go` on
// stdin it floods that session, keeping up to WINDOW_FRAMES unanswered, with frames a node must
// refuse — allocations over the tenant's quota, DMAs above limits.maxDmaBytes, launches above
// device.maxKernelWork — while STORM_LOOPS loops storm the node with session opens (each one
// closed again when it opens). On `pause` it stops sending and says `idle` once everything it
// sent is answered. When stdin closes it closes its session and prints one JSON line: the codes
// it was answered with, counted.

import { createInterface } from "node:readline";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { type Call, createClient, ErrorCode, encodeFrame, errorName, wire } from "@vgpu-ha/common";

const [endpoint, tenant, token] = process.argv.slice(2) as [string, string, string];
const FRAMES_PER_MESSAGE = 64;
/** Session opens in flight at once. */
const STORM_LOOPS = 8;
/** Frames sent and not answered yet, at most (the node refuses more than its maxFramesInFlight). */
const WINDOW_FRAMES = 512;
const counts: Record<string, number> = {};
const count = (name: string, n = 1) => {
  counts[name] = (counts[name] ?? 0) + n;
};
const mode = process.argv[5] ?? "both";
let stopping = false;
let active = false;
const onStop: (() => void)[] = [];
/** Called when the flood or the storm may have gone quiet. */
const onQuiet: (() => void)[] = [];
let unansweredFrames = 0;
let opensInFlight = 0;
let wake: () => void = () => undefined;
let activated = new Promise<void>((resolve) => {
  wake = resolve;
});

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
      while (!stopping && active && ready && next - 1 - answered < WINDOW_FRAMES) {
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
        unansweredFrames = next - 1 - answered;
        if (!ready && answered >= 4) {
          ready = true;
          flooder = pump;
          say("ready");
        }
        pump();
        unansweredFrames = next - 1 - answered;
        for (const q of onQuiet) q();
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

/** Session opens, one after another without pause; each answer counted, each stream closed. */
async function storm(): Promise<void> {
  while (!stopping) {
    if (!active) {
      await activated;
      continue;
    }
    opensInFlight++;
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
    opensInFlight--;
    for (const q of onQuiet) q();
  }
}

const say = (line: string) => process.stdout.write(`${line}\n`);
let flooder: () => void = () => undefined;

/** Says idle once nothing it sent is unanswered. */
function sayWhenIdle(): void {
  const check = () => {
    if (active || unansweredFrames > 0 || opensInFlight > 0) return;
    onQuiet.splice(onQuiet.indexOf(check), 1);
    say("idle");
  };
  onQuiet.push(check);
  check();
}

createInterface({ input: process.stdin }).on("line", (line) => {
  if (line === "go" && !active) {
    active = true;
    wake();
    flooder();
  } else if (line === "pause" && active) {
    active = false;
    activated = new Promise<void>((resolve) => {
      wake = resolve;
    });
    sayWhenIdle();
  }
});
process.stdin.on("close", () => {
  stopping = true;
  active = false;
  wake();
  for (const stop of onStop) stop();
});
if (mode === "storm") say("ready");
await Promise.all([
  mode !== "storm" ? flood() : Promise.resolve(),
  ...(mode !== "flood" ? Array.from({ length: STORM_LOOPS }, () => storm()) : []),
]);
client.close();
process.stdout.write(`${JSON.stringify(counts)}\n`);
