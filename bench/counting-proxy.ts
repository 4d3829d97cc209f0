// A TCP proxy between primary and standby that counts the real bytes on the wire in each
// direction (the entry byte counts in /metrics are estimates). It runs in a process of its
// own so this process's busy loops do not delay the replication stream.
import { forkScript } from "./forked.js";

export interface WireCounts {
  /** Primary → standby. */
  readonly up: number;
  /** Standby → primary. */
  readonly down: number;
  readonly connections: number;
}

export interface CountingProxy {
  /** host:port for the primary to dial. */
  readonly address: string;
  readonly pid: number;
  counts(): Promise<WireCounts>;
  stop(): Promise<void>;
}

export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const proxy = await forkScript<{ port: number }, WireCounts>("tcp-proxy-child", [target]);
  return {
    address: `127.0.0.1:${proxy.ready.port}`,
    pid: proxy.child.pid!,
    counts: () => proxy.request({ counts: true }),
    stop: () => proxy.stop(),
  };
}
