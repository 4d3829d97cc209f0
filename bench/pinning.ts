// BENCH_PIN_CORES=N models hosts with cores of their own on one larger machine: the benchmark
// client is pinned to core 0 and every node it starts gets N cores no other process of the
// benchmark has (taskset), released when the node stops. A run that needs more cores than the
// machine has fails rather than share them. Unset: nothing is pinned.
import { execFileSync } from "node:child_process";
import os from "node:os";

const CLIENT_CORE = 0;

export function coresPerNode(): number | undefined {
  const n = Number(process.env.BENCH_PIN_CORES ?? "");
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

const free = new Set<number>();
let clientPinned = false;

function pinClient(): void {
  if (clientPinned) return;
  // -a: every thread of this process (V8's and libuv's helpers too), not only the main one.
  execFileSync("taskset", ["-a", "-cp", String(CLIENT_CORE), String(process.pid)], {
    stdio: "ignore",
  });
  for (let core = 0; core < os.cpus().length; core++) if (core !== CLIENT_CORE) free.add(core);
  clientPinned = true;
}

export interface Pinned {
  /** Put before the node's command (spawnVgpud's `wrap`). */
  readonly wrap: readonly string[];
  readonly cores: readonly number[];
  release(): void;
}

/** Cores of its own for a node about to start, or undefined when BENCH_PIN_CORES is unset. */
export function pinNode(label: string): Pinned | undefined {
  const n = coresPerNode();
  if (n === undefined) return undefined;
  pinClient();
  if (free.size < n) {
    throw new Error(
      `BENCH_PIN_CORES=${n}: no ${n} free cores left for ${label} (${os.cpus().length} cores, client on ${CLIENT_CORE})`,
    );
  }
  const cores = [...free].sort((a, b) => a - b).slice(0, n);
  for (const c of cores) free.delete(c);
  return {
    wrap: ["taskset", "-c", cores.join(",")],
    cores,
    release: () => {
      for (const c of cores) free.add(c);
    },
  };
}

export const PIN_NOTE = () =>
  coresPerNode() === undefined
    ? []
    : [
        `BENCH_PIN_CORES=${coresPerNode()}: the client pinned to core ${CLIENT_CORE}, every node to ${coresPerNode()} cores of its own (taskset)`,
      ];
