// A real single-member etcd on loopback ports with a temporary data dir, for tests and the
// chaos harness. stop() kills it and removes the dir; an exit guard kills it if the run ends
// without stopping it.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "@vgpu-ha/daemon";
import { startServerProcess } from "./server-process.js";

export interface EtcdServer {
  /** Client URL, e.g. http://127.0.0.1:23791 */
  readonly endpoint: string;
  /** The client URL on each host it was asked to listen on (loopback first). */
  readonly endpoints: readonly string[];
  readonly process: ChildProcess;
  /** SIGSTOP / SIGCONT the server (etcd unreachable but its lease clock keeps running). */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

/**
 * `hosts`: more addresses to serve clients on, besides 127.0.0.1 (the chaos harness's nodes in
 * network namespaces reach it on their veth's root-side address), same port.
 */
export async function startEtcd(
  binary = "etcd",
  options: { hosts?: readonly string[] } = {},
): Promise<EtcdServer> {
  const dir = mkdtempSync(join(tmpdir(), "vgpu-etcd-"));
  const clientPort = await freePort();
  const peerPort = await freePort();
  const endpoint = `http://127.0.0.1:${clientPort}`;
  const endpoints = [endpoint, ...(options.hosts ?? []).map((h) => `http://${h}:${clientPort}`)];
  const peer = `http://127.0.0.1:${peerPort}`;
  const server = await startServerProcess({
    name: "etcd",
    binary,
    args: [
      "--name",
      "vgpu-test",
      "--data-dir",
      join(dir, "data"),
      "--listen-client-urls",
      endpoints.join(","),
      "--advertise-client-urls",
      endpoint,
      "--listen-peer-urls",
      peer,
      "--initial-advertise-peer-urls",
      peer,
      "--initial-cluster",
      `vgpu-test=${peer}`,
      "--initial-cluster-state",
      "new",
      "--log-level",
      "error",
    ],
    dir,
    readyUrl: `${endpoint}/health`,
    readyTimeoutMs: 20_000,
  });
  const child = server.process;
  return {
    endpoint,
    endpoints,
    process: child,
    pause: () => child.kill("SIGSTOP"),
    resume: () => child.kill("SIGCONT"),
    stop: server.stop,
  };
}
