// The two vgpud nodes of a chaos run: their configs, their processes (each start a new
// instance with its own log file; the state directory, so the persisted epoch, survives), and
// the signals the nemesis sends. Every process is registered with the Cleanup.
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pairConfigs, type SpawnedNode, spawnVgpud } from "@vgpu-ha/daemon";
import { DEVICE_THREAD, type Mode } from "../support/modes.js";
import { merge } from "../support/replication-pair.js";
import type { Cleanup } from "./cleanup.js";
import { type Hosts, NODE_NAMES, type NodeName } from "./hosts.js";

export const ADMIN_TOKEN = "chaos-admin-token-0001";
export const GUEST = { tenant: "chaos", token: "chaos-tenant-token-1" };

type Json = Record<string, unknown>;

/** One process of a node, from start to exit. */
export interface Instance {
  readonly node: NodeName;
  readonly index: number;
  readonly pid: number;
  readonly logFile: string;
  readonly startedMs: number;
  exitedMs?: number;
  exit?: number | string;
  /** Whether the harness caused the exit (SIGKILL by the nemesis, or the final stop). */
  expectedExit: boolean;
}

export type ProcessState = "down" | "running" | "paused";

export interface ClusterOptions {
  readonly dir: string;
  readonly hosts: Hosts;
  readonly mode: Mode;
  /** etcd client URLs per node, in etcd lease mode. */
  readonly etcd?: Record<NodeName, string>;
  /** Milliseconds since the run's start (the harness's clock). */
  readonly now: () => number;
  readonly log: (msg: string) => void;
  /** Cluster id (default "chaos"). */
  readonly clusterId?: string;
  /** Merged (deeply) over each node's config, then `perNode`'s part for it. */
  readonly extra?: Json;
  readonly perNode?: Partial<Record<NodeName, Json>>;
}

export class Cluster {
  readonly configs: Record<NodeName, Json>;
  readonly instances: Instance[] = [];
  private readonly live = new Map<NodeName, { spawned: SpawnedNode; instance: Instance }>();
  private readonly paused = new Set<NodeName>();
  private readonly starting = new Map<NodeName, Promise<void>>();

  private constructor(
    private readonly options: ClusterOptions,
    configs: Record<NodeName, Json>,
    private readonly cleanup: Cleanup,
  ) {
    this.configs = configs;
  }

  static async create(options: ClusterOptions, cleanup: Cleanup): Promise<Cluster> {
    const { hosts } = options;
    const [a, b] = await pairConfigs({
      names: ["node-a", "node-b"],
      dir: options.dir,
      clusterId: options.clusterId ?? "chaos",
      seeds: [101, 202],
      common: {
        ops: { token: ADMIN_TOKEN },
        device: { vramBytes: "512MiB", ...DEVICE_THREAD },
        // The random workloads' "DMA too big" fault must be refused as such (as in the tests).
        limits: { maxDmaBytes: "1MiB" },
        tenants: [
          { name: GUEST.tenant, token: GUEST.token, vramQuotaBytes: "256MiB", boQuota: 100_000 },
        ],
        replication: { mode: options.mode },
        log: { level: "info" },
      },
    });
    const configs: Record<NodeName, Json> = {
      a: merge(merge(a!, options.extra), options.perNode?.a),
      b: merge(merge(b!, options.extra), options.perNode?.b),
    };
    for (const n of NODE_NAMES) {
      const p = hosts.placement[n];
      const c = configs[n];
      c.guest = { ...(c.guest as Json), listen: p.guestListen };
      c.ops = { ...(c.ops as Json), listen: p.opsListen };
      c.replication = { ...(c.replication as Json), listen: p.replicationListen };
      c.peer = {
        ...(c.peer as Json),
        replicationAddress: p.peerReplicationAddress,
        guestAddress: p.peerGuestAddress,
      };
      if (options.etcd) {
        c.lease = { mode: "etcd", etcd: { endpoints: [options.etcd[n]] } };
      }
    }
    mkdirSync(options.dir, { recursive: true });
    // A node still starting when the run is interrupted is not registered yet: find it by its
    // config file, which lives in this run's directory.
    const strays = () => killStrays(options.dir);
    cleanup.add({ name: "nodes still starting", run: strays, sync: strays });
    return new Cluster(options, configs, cleanup);
  }

  /** The node id of a node name. */
  nodeId(n: NodeName): string {
    return String(this.configs[n].nodeId);
  }

  nameOf(nodeId: string): NodeName | undefined {
    return NODE_NAMES.find((n) => this.nodeId(n) === nodeId);
  }

  state(n: NodeName): ProcessState {
    if (!this.live.has(n)) return "down";
    return this.paused.has(n) ? "paused" : "running";
  }

  pid(n: NodeName): number | undefined {
    return this.live.get(n)?.instance.pid;
  }

  /** Starts a new instance of n (it rejoins with its persisted epoch). */
  start(n: NodeName): Promise<void> {
    const pending = this.starting.get(n);
    if (pending) return pending;
    const started = this.spawn(n).finally(() => this.starting.delete(n));
    this.starting.set(n, started);
    return started;
  }

  private async spawn(n: NodeName): Promise<void> {
    if (this.live.has(n)) throw new Error(`${n} is already running`);
    const index = this.instances.filter((i) => i.node === n).length;
    const spawned = await spawnVgpud({
      dir: this.options.dir,
      name: `${n}-${index}`,
      config: { ...this.configs[n], stateDir: join(this.options.dir, `${n}-state`) },
      wrap: this.options.hosts.placement[n].wrap,
      startTimeoutMs: 20_000,
    });
    const instance: Instance = {
      node: n,
      index,
      pid: spawned.pid,
      logFile: spawned.logFile,
      startedMs: this.options.now(),
      expectedExit: false,
    };
    this.instances.push(instance);
    this.live.set(n, { spawned, instance });
    this.options.log(`started ${this.nodeId(n)} instance ${index} (pid ${spawned.pid})`);
    const undo = this.cleanup.add({
      name: `vgpud ${n}-${index} (pid ${spawned.pid})`,
      run: async () => {
        instance.expectedExit = true;
        this.signal(spawned, "SIGCONT");
        await spawned.stop(3000);
      },
      sync: () => {
        this.signal(spawned, "SIGCONT");
        this.signal(spawned, "SIGKILL");
      },
    });
    void spawned.exited.then((code) => {
      instance.exitedMs = this.options.now();
      instance.exit = code;
      if (this.live.get(n)?.instance === instance) {
        this.live.delete(n);
        this.paused.delete(n);
      }
      void undo();
    });
  }

  private signal(spawned: SpawnedNode, signal: NodeJS.Signals): void {
    try {
      process.kill(spawned.pid, signal);
    } catch {
      // already gone
    }
  }

  /** SIGKILL; resolves when the process is gone. */
  async kill(n: NodeName): Promise<void> {
    const live = this.live.get(n);
    if (!live) return;
    live.instance.expectedExit = true;
    this.signal(live.spawned, "SIGKILL");
    await live.spawned.exited;
  }

  pause(n: NodeName): void {
    const live = this.live.get(n);
    if (!live) return;
    this.signal(live.spawned, "SIGSTOP");
    this.paused.add(n);
  }

  resume(n: NodeName): void {
    const live = this.live.get(n);
    if (!live) return;
    this.signal(live.spawned, "SIGCONT");
    this.paused.delete(n);
  }

  /** Unexpected exits so far (a node that died without the harness killing it). */
  unexpectedExits(): Instance[] {
    return this.instances.filter((i) => i.exit !== undefined && !i.expectedExit);
  }

  /** SIGCONT and SIGTERM every node; resolves when all are gone. */
  async stopAll(): Promise<void> {
    await Promise.all([...this.starting.values()].map((p) => p.catch(() => undefined)));
    await Promise.all(
      [...this.live.values()].map(async ({ spawned, instance }) => {
        instance.expectedExit = true;
        this.signal(spawned, "SIGCONT");
        await spawned.stop(3000);
      }),
    );
  }
}

/** SIGKILLs every process whose command line names a file in `dir` (this run's nodes). */
function killStrays(dir: string): void {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let cmdline = "";
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8");
    } catch {
      continue;
    }
    if (!cmdline.split("\0").some((arg) => arg.startsWith(`${dir}/`))) continue;
    try {
      process.kill(Number(entry), "SIGCONT");
      process.kill(Number(entry), "SIGKILL");
    } catch {
      // gone
    }
  }
}
