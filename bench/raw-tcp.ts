// The physical reference for replication throughput: a plain Node TCP socket pump over
// loopback between two processes of this run (tcp-pump-child.js), 1 MiB writes.
import { forkScript } from "./forked.js";

export interface RawTcpResult {
  readonly bytes: number;
  /** Sink side: first byte to last byte. */
  readonly seconds: number;
  readonly mbPerSecond: number;
}

export async function rawTcp(totalBytes: number): Promise<RawTcpResult> {
  const sink = await forkScript<{ port: number }, { bytes: number; seconds: number }>(
    "tcp-pump-child",
    ["sink", String(totalBytes)],
  );
  try {
    const received = sink.next();
    const source = await forkScript<{ started: true }, { done: true }>("tcp-pump-child", [
      "source",
      String(sink.ready.port),
      String(totalBytes),
    ]);
    const r = await received;
    await source.next();
    await source.stop();
    return { ...r, mbPerSecond: r.bytes / r.seconds / 1e6 };
  } finally {
    await sink.stop();
  }
}
