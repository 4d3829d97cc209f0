// Connections of garbage bytes to a port: `connections` TCP connections, at most `concurrency`
// at a time, each sending `bytes` random bytes (seeded) and waiting up to 2 s for the node to
// close it.
import { connect } from "node:net";
import { type AttackOutcome, Tally } from "./outcome.js";
import { attackerAddress, splitTarget } from "./target.js";

export interface GarbageSpec {
  readonly target: string;
  readonly connections: number;
  readonly concurrency: number;
  readonly bytes: number;
  readonly seed: number;
}

/** xorshift32: the same garbage for the same seed. */
function garbageBytes(seed: number, n: number): Buffer {
  const out = Buffer.alloc(n);
  let x = seed | 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

export async function garbage(spec: GarbageSpec): Promise<AttackOutcome> {
  const { host, port } = splitTarget(spec.target);
  const sent = new Tally();
  const answers = new Tally();
  let next = 0;
  const one = (i: number) =>
    new Promise<void>((resolve) => {
      const socket = connect({ host, port, ...attackerAddress(host) });
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        answers.add("still open after 2 s");
        socket.destroy();
      }, 2000);
      socket.on("connect", () => {
        sent.add("connections");
        socket.write(garbageBytes(spec.seed + i, spec.bytes));
        sent.add("bytes", spec.bytes);
      });
      socket.on("data", () => answers.add("answered bytes"));
      socket.on("error", (e: NodeJS.ErrnoException) => answers.add(`error:${e.code ?? "?"}`));
      socket.on("close", () => {
        if (!timedOut) answers.add("closed by the node");
        clearTimeout(timer);
        resolve();
      });
      socket.on("end", () => socket.end());
    });
  const worker = async () => {
    while (next < spec.connections) await one(next++);
  };
  await Promise.all(Array.from({ length: spec.concurrency }, worker));
  return {
    sent: sent.counts,
    answers: answers.counts,
    note: `${spec.connections} connections (${spec.concurrency} at a time) of ${spec.bytes} random bytes each`,
  };
}
