// The two "hosts" the nodes run on, and the link between them the nemesis cuts and degrades.
//   netns:    each node in its own network namespace (vgpu-<pid>-a, -b), the replication link a
//             veth pair between them; each namespace has a second veth to the root namespace,
//             where the guests, etcd and the harness live. Addresses come from 198.18.0.0/15
//             (reserved for network benchmarking), one free /24 per run. Partitions are
//             blackhole routes in a namespace (its packets to the peer are dropped: one way, or
//             both with a route on each side); degradation is tc netem on both link ends when
//             the kernel has it, else a tbf rate limit with a short queue (delay and drops).
//   loopback: both nodes on 127.0.0.1 ports; each node reaches its peer's replication port
//             through a TcpProxy that refuses, blackholes a direction, or delays.
// Both leave nothing behind: every object is registered with the Cleanup, and a sweep removes
// whatever carries this run's names.
import { execFile, execFileSync } from "node:child_process";
import { freePort } from "@vgpu-ha/daemon";
import { TcpProxy } from "../support/tcp-proxy.js";
import type { Cleanup } from "./cleanup.js";

export type NodeName = "a" | "b";
export const NODE_NAMES: readonly NodeName[] = ["a", "b"];
export const peerOf = (n: NodeName): NodeName => (n === "a" ? "b" : "a");

/** Where a node listens and how it reaches its peer. */
export interface NodePlacement {
  readonly guestListen: string;
  readonly opsListen: string;
  readonly replicationListen: string;
  readonly peerReplicationAddress: string;
  readonly peerGuestAddress: string;
  /** Base URL of its ops server, from the guests' side. */
  readonly opsUrl: string;
  /** Command to run the node under (ip netns exec …), if any. */
  readonly wrap: readonly string[];
  /** The address this node reaches the harness's etcd on. */
  readonly etcdHost: string;
}

/** A degraded link: what the nemesis asks for. */
export interface LinkDegradation {
  readonly delayMs: number;
  readonly jitterMs: number;
  readonly lossPercent: number;
  /** Used when netem is missing (netns): a rate limit, and the queue's longest wait. */
  readonly rateKbit: number;
  readonly queueMs: number;
}

/** Which packets a partition drops: from `from` to its peer, or both ways. */
export type PartitionSide = "both" | NodeName;

export interface Hosts {
  readonly kind: "netns" | "loopback";
  /** One line on how the link is cut and degraded here. */
  readonly describe: string;
  readonly placement: Record<NodeName, NodePlacement>;
  /** Extra addresses etcd must serve clients on. */
  readonly etcdHosts: readonly string[];
  /** Drops packets from `side` to its peer ("both": each way). */
  partition(side: PartitionSide): Promise<void>;
  heal(): Promise<void>;
  /** Degrades the link; returns what was applied, in words. */
  degrade(d: LinkDegradation): Promise<string>;
  restore(): Promise<void>;
}

/** Runs a command; rejects with its stderr. */
export function run(cmd: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, [...args], { encoding: "utf8" }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(" ")}: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
  });
}

function runSync(cmd: string, args: readonly string[]): string {
  try {
    return execFileSync(cmd, [...args], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  } catch {
    return "";
  }
}

/** Whether network namespaces can be made here (root, `ip` and `tc` on PATH). */
export function netnsAvailable(): { ok: boolean; why: string } {
  if (process.getuid?.() !== 0) return { ok: false, why: "not root" };
  for (const bin of ["ip", "tc"]) {
    if (runSync("sh", ["-c", `command -v ${bin}`]).trim() === "") {
      return { ok: false, why: `no ${bin} on PATH` };
    }
  }
  return { ok: true, why: "root with ip and tc" };
}

// ---- network namespaces ----

/** Names of this run's objects: namespaces vgpu-<pid>-a/b, interfaces vg<pid>-xx. */
export function runNames(pid: number) {
  return {
    namespace: (n: NodeName) => `vgpu-${pid}-${n}`,
    /** The replication link's end in n's namespace. */
    link: (n: NodeName) => `vg${pid}-l${n}`,
    /** The guest veth's end in n's namespace, and its root-side end. */
    guestNs: (n: NodeName) => `vg${pid}-g${n}`,
    guestRoot: (n: NodeName) => `vg${pid}-r${n}`,
    namespacePrefix: `vgpu-${pid}-`,
    linkPrefix: `vg${pid}-`,
  };
}

/**
 * Removes every namespace (and the processes in it) and root-side interface named for `pid`'s
 * run. Synchronous, so it also runs from an exit hook. Returns what it removed.
 */
export function sweepRun(pid: number): string[] {
  const names = runNames(pid);
  const removed: string[] = [];
  for (const line of runSync("ip", ["netns", "list"]).split("\n")) {
    const ns = line.split(" ")[0] ?? "";
    if (!ns.startsWith(names.namespacePrefix)) continue;
    for (const p of runSync("ip", ["netns", "pids", ns]).split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(p), "SIGCONT");
        process.kill(Number(p), "SIGKILL");
      } catch {
        // gone
      }
    }
    runSync("ip", ["netns", "del", ns]);
    removed.push(`netns ${ns}`);
  }
  for (const line of runSync("ip", ["-o", "link", "show"]).split("\n")) {
    const m = /^\d+: ([^:@]+)[@:]/.exec(line);
    if (m?.[1]?.startsWith(names.linkPrefix)) {
      runSync("ip", ["link", "del", m[1]]);
      removed.push(`link ${m[1]}`);
    }
  }
  return removed;
}

/** Leftovers of earlier runs whose process is gone (a harness killed with SIGKILL). */
export function sweepStaleRuns(): string[] {
  const pids = new Set<number>();
  for (const line of runSync("ip", ["netns", "list"]).split("\n")) {
    const m = /^vgpu-(\d+)-[ab]\b/.exec(line);
    if (m) pids.add(Number(m[1]));
  }
  const removed: string[] = [];
  for (const pid of pids) {
    if (pid === process.pid || alive(pid)) continue;
    removed.push(...sweepRun(pid));
  }
  return removed;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A /24 of 198.18.0.0/15 that no interface of the root namespace uses. */
async function freeSubnet(): Promise<string> {
  const used = await run("ip", ["-o", "-4", "addr", "show"]);
  for (let i = 0; i < 254; i++) {
    const x = ((process.pid + i) % 254) + 1;
    const prefix = `198.18.${x}.`;
    if (!used.includes(prefix)) return prefix;
  }
  throw new Error("no free /24 in 198.18.0.0/16");
}

export async function createNetnsHosts(cleanup: Cleanup): Promise<Hosts> {
  const pid = process.pid;
  const names = runNames(pid);
  cleanup.add({
    name: "network namespaces and links",
    run: () => void sweepRun(pid),
    sync: () => void sweepRun(pid),
  });
  const net = await freeSubnet();
  const addr = {
    link: { a: `${net}1`, b: `${net}2` },
    guest: { a: `${net}5`, b: `${net}9` },
    root: { a: `${net}6`, b: `${net}10` },
  };
  const ip = (...args: string[]) => run("ip", args);
  const nsIp = (n: NodeName, ...args: string[]) => run("ip", ["-n", names.namespace(n), ...args]);
  for (const n of NODE_NAMES) {
    await ip("netns", "add", names.namespace(n));
    await nsIp(n, "link", "set", "lo", "up");
  }
  await ip("link", "add", names.link("a"), "type", "veth", "peer", "name", names.link("b"));
  for (const n of NODE_NAMES) {
    await ip("link", "set", names.link(n), "netns", names.namespace(n));
    await nsIp(n, "addr", "add", `${addr.link[n]}/30`, "dev", names.link(n));
    await nsIp(n, "link", "set", names.link(n), "up");
    await ip("link", "add", names.guestRoot(n), "type", "veth", "peer", "name", names.guestNs(n));
    await ip("link", "set", names.guestNs(n), "netns", names.namespace(n));
    await nsIp(n, "addr", "add", `${addr.guest[n]}/30`, "dev", names.guestNs(n));
    await nsIp(n, "link", "set", names.guestNs(n), "up");
    await ip("addr", "add", `${addr.root[n]}/30`, "dev", names.guestRoot(n));
    await ip("link", "set", names.guestRoot(n), "up");
  }
  const netem = await run("tc", [
    "-n",
    names.namespace("a"),
    "qdisc",
    "add",
    "dev",
    names.link("a"),
    "root",
    "netem",
    "delay",
    "1ms",
  ]).then(
    () => true,
    () => false,
  );
  if (netem)
    await run("tc", ["-n", names.namespace("a"), "qdisc", "del", "dev", names.link("a"), "root"]);
  const placement = (n: NodeName): NodePlacement => {
    const p = peerOf(n);
    return {
      guestListen: `${addr.guest[n]}:7400`,
      opsListen: `${addr.guest[n]}:9400`,
      replicationListen: `${addr.link[n]}:7500`,
      peerReplicationAddress: `${addr.link[p]}:7500`,
      peerGuestAddress: `${addr.guest[p]}:7400`,
      opsUrl: `http://${addr.guest[n]}:9400`,
      wrap: ["ip", "netns", "exec", names.namespace(n)],
      etcdHost: addr.root[n],
    };
  };
  const blackholes = new Set<NodeName>();
  const degraded = new Set<NodeName>();
  const tc = (n: NodeName, ...args: string[]) =>
    run("tc", ["-n", names.namespace(n), "qdisc", ...args]);
  return {
    kind: "netns",
    describe:
      `namespaces ${names.namespace("a")} and ${names.namespace("b")}, link ${names.link("a")}<->${names.link("b")} (${net}0/30), ` +
      `partition by blackhole routes, degradation by ${netem ? "tc netem" : "tc tbf (this kernel has no netem)"}`,
    placement: { a: placement("a"), b: placement("b") },
    etcdHosts: [addr.root.a, addr.root.b],
    async partition(side) {
      const from: NodeName[] = side === "both" ? ["a", "b"] : [side];
      for (const n of from) {
        await nsIp(n, "route", "add", "blackhole", `${addr.link[peerOf(n)]}/32`);
        blackholes.add(n);
      }
    },
    async heal() {
      for (const n of [...blackholes]) {
        await nsIp(n, "route", "del", "blackhole", `${addr.link[peerOf(n)]}/32`);
        blackholes.delete(n);
      }
    },
    async degrade(d) {
      for (const n of NODE_NAMES) {
        const spec = netem
          ? ["netem", "delay", `${d.delayMs}ms`, `${d.jitterMs}ms`, "loss", `${d.lossPercent}%`]
          : ["tbf", "rate", `${d.rateKbit}kbit`, "burst", "8kb", "latency", `${d.queueMs}ms`];
        await tc(n, "add", "dev", names.link(n), "root", ...spec);
        degraded.add(n);
      }
      return netem
        ? `netem delay ${d.delayMs}ms jitter ${d.jitterMs}ms loss ${d.lossPercent}% each way`
        : `tbf rate ${d.rateKbit}kbit, queue ${d.queueMs}ms (drops beyond) each way`;
    },
    async restore() {
      for (const n of [...degraded]) {
        await tc(n, "del", "dev", names.link(n), "root");
        degraded.delete(n);
      }
    },
  };
}

// ---- loopback ----

export async function createLoopbackHosts(cleanup: Cleanup): Promise<Hosts> {
  const ports = {
    guest: { a: await freePort(), b: await freePort() },
    replication: { a: await freePort(), b: await freePort() },
    ops: { a: await freePort(), b: await freePort() },
  };
  const local = (port: number) => `127.0.0.1:${port}`;
  // proxy[n]: the way n dials its peer's replication port.
  const proxy: Record<NodeName, TcpProxy> = {
    a: await TcpProxy.start(local(ports.replication.b)),
    b: await TcpProxy.start(local(ports.replication.a)),
  };
  cleanup.add({
    name: "link proxies",
    run: async () => {
      await proxy.a.close();
      await proxy.b.close();
    },
  });
  const placement = (n: NodeName): NodePlacement => {
    const p = peerOf(n);
    return {
      guestListen: local(ports.guest[n]),
      opsListen: local(ports.ops[n]),
      replicationListen: local(ports.replication[n]),
      peerReplicationAddress: proxy[n].address,
      peerGuestAddress: local(ports.guest[p]),
      opsUrl: `http://${local(ports.ops[n])}`,
      wrap: [],
      etcdHost: "127.0.0.1",
    };
  };
  return {
    kind: "loopback",
    describe:
      "loopback ports; the link is two TCP proxies (partition: refuse and cut, or drop one direction's bytes; degradation: delay and jitter only, no packet loss)",
    placement: { a: placement("a"), b: placement("b") },
    etcdHosts: [],
    async partition(side) {
      if (side === "both") {
        for (const n of NODE_NAMES) {
          proxy[n].setTarget(undefined);
          proxy[n].breakAll();
        }
        return;
      }
      // n's bytes to its peer: "up" on the connections n dials, "down" on those its peer dials.
      proxy[side].blackhole("up");
      proxy[peerOf(side)].blackhole("down");
    },
    async heal() {
      for (const n of NODE_NAMES) {
        proxy[n].heal();
        proxy[n].setTarget(local(ports.replication[peerOf(n)]));
      }
    },
    async degrade(d) {
      for (const n of NODE_NAMES) proxy[n].setDelay(d.delayMs, d.jitterMs);
      return `proxy delay ${d.delayMs}ms jitter ${d.jitterMs}ms each way (loss not emulated on loopback)`;
    },
    async restore() {
      for (const n of NODE_NAMES) proxy[n].setDelay(0, 0);
    },
  };
}
