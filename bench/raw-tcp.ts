// The physical reference for replication throughput: a plain Node TCP socket pump over
// loopback between two processes of this run (tcp-pump-child.js), 1 MiB writes. With `fresh`
// the sink also copies every byte into fresh memory of the transfer's size: the least a fresh
// standby does (its replica's VRAM is memory the process never touched, and the kernel maps
// each page on first touch), so the snapshot's limit on a host where that costs more than the
// transport. Under BENCH_PIN_CORES each end gets its cores as a node would (pinning.ts).
import { execFileSync } from "node:child_process";
import { type Forked, forkScript } from "./forked.js";
import { pinNode } from "./pinning.js";

export interface RawTcpResult {
  readonly bytes: number;
  /** Sink side: first byte to last byte. */
  readonly seconds: number;
  readonly mbPerSecond: number;
}

export async function rawTcp(totalBytes: number, fresh = false): Promise<RawTcpResult> {
  const sinkPin = pinNode("raw-tcp-sink");
  const sourcePin = sinkPin === undefined ? undefined : pinNode("raw-tcp-source");
  try {
    const sink = await forkScript<{ port: number }, { bytes: number; seconds: number }>(
      "tcp-pump-child",
      ["sink", String(totalBytes), ...(fresh ? ["fresh"] : [])],
    );
    try {
      pin(sink, sinkPin?.cores);
      const received = sink.next();
      const source = await forkScript<{ started: true }, { done: true }>("tcp-pump-child", [
        "source",
        String(sink.ready.port),
        String(totalBytes),
      ]);
      pin(source, sourcePin?.cores);
      const done = source.request({ go: true });
      const r = await received;
      await done;
      await source.stop();
      return { ...r, mbPerSecond: r.bytes / r.seconds / 1e6 };
    } finally {
      await sink.stop();
    }
  } finally {
    sinkPin?.release();
    sourcePin?.release();
  }
}

/** Every thread of the child onto `cores`: the sink before a connection comes, the source before
 * it is told to connect. */
function pin(child: Forked<unknown, unknown>, cores: readonly number[] | undefined): void {
  if (cores === undefined || child.child.pid === undefined) return;
  execFileSync("taskset", ["-a", "-cp", cores.join(","), String(child.child.pid)], {
    stdio: "ignore",
  });
}
