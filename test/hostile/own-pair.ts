// The pair npm run hostile attacks: two vgpud nodes on the chaos harness's hosts (each in its
// own network namespace when root, else loopback ports), with the hostile pair config, plain or
// with mutual TLS (certificates of deploy/examples/make-certs.sh). In namespaces the attackers
// live in the root namespace, like a host on the nodes' network: a route through each node's
// guest veth lets them reach its replication address too. Every object registers its undo.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Cleanup } from "../chaos/cleanup.js";
import { Cluster } from "../chaos/cluster.js";
import { type Hosts, NODE_NAMES, type NodeName, run } from "../chaos/hosts.js";
import { makeCerts } from "../support/certs.js";
import type { AttackerTls } from "./attacks/outcome.js";
import type { PairNode } from "./catalogue.js";
import { hostilePairConfig } from "./pair-config.js";
import { waitHealthy } from "./pair-view.js";

export const CLUSTER_ID = "hostile";
const ids: Record<NodeName, string> = { a: "node-a", b: "node-b" };

/** Lets the root namespace reach each node's replication address through its guest veth. */
export async function routeToReplication(hosts: Hosts, cleanup: Cleanup): Promise<void> {
  if (hosts.kind !== "netns") return;
  for (const n of NODE_NAMES) {
    const p = hosts.placement[n];
    const via = p.guestListen.split(":")[0]!;
    const to = p.replicationListen.split(":")[0]!;
    await run("ip", ["route", "add", `${to}/32`, "via", via]);
    cleanup.add({
      name: `route to ${to}`,
      run: () =>
        run("ip", ["route", "del", `${to}/32`]).then(
          () => undefined,
          () => undefined,
        ),
    });
  }
}

export class OwnPair {
  private constructor(
    readonly cluster: Cluster,
    private readonly hosts: Hosts,
    private readonly cleanup: Cleanup,
    readonly attackerTls: ((peerName: string) => AttackerTls) | undefined,
  ) {}

  static async start(options: {
    hosts: Hosts;
    dir: string;
    tls: boolean;
    cleanup: Cleanup;
    log: (m: string) => void;
    now: () => number;
  }): Promise<OwnPair> {
    mkdirSync(options.dir, { recursive: true });
    let perNode: Partial<Record<NodeName, Record<string, unknown>>> | undefined;
    let attackerTls: ((peerName: string) => AttackerTls) | undefined;
    if (options.tls) {
      const certDir = join(options.dir, "certs");
      const certs = makeCerts(certDir, ids.a, ids.b);
      perNode = { a: { tls: certs[ids.a] }, b: { tls: certs[ids.b] } };
      // A copy of the pair holds certificates of the same CA with the same names.
      attackerTls = (peerName) => ({
        ...certs[peerName]!,
        serverName: peerName === ids.a ? ids.b : ids.a,
      });
    }
    const cluster = await Cluster.create(
      {
        dir: join(options.dir, "nodes"),
        hosts: options.hosts,
        mode: "sync",
        now: options.now,
        log: options.log,
        clusterId: CLUSTER_ID,
        extra: hostilePairConfig(),
        ...(perNode ? { perNode } : {}),
      },
      options.cleanup,
    );
    await cluster.start("b");
    await cluster.start("a");
    const pair = new OwnPair(cluster, options.hosts, options.cleanup, attackerTls);
    await waitHealthy(pair.nodes(), 60_000);
    return pair;
  }

  nodes(): [PairNode, PairNode] {
    const view = (n: NodeName): PairNode => {
      const p = this.hosts.placement[n];
      const instance = [...this.cluster.instances].reverse().find((i) => i.node === n);
      const pid = this.cluster.pid(n);
      return {
        id: ids[n],
        peerName: ids[n === "a" ? "b" : "a"],
        guest: p.guestListen,
        replication: p.replicationListen,
        opsUrl: p.opsUrl,
        ...(pid !== undefined ? { pid } : {}),
        ...(instance ? { logFile: instance.logFile } : {}),
      };
    };
    return [view("a"), view("b")];
  }

  get endpoints(): string[] {
    return NODE_NAMES.map((n) => this.hosts.placement[n].guestListen);
  }

  async stop(): Promise<void> {
    await this.cluster.stopAll();
  }
}
