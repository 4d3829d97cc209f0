// The configs of a two-node pair on one host: free ports chosen up front so each node knows the
// other's guest and replication addresses (either can then be primary, be killed, restart and
// rejoin) and a restarted node keeps its ops URL; its own state directory, different device
// seeds. `common` is merged into both.
import { join } from "node:path";
import { freePort } from "./free-port.js";

type Json = Record<string, unknown>;

export async function pairConfigs(options: {
  /** Node ids: the first is configured primary, the second standby. */
  readonly names: readonly [string, string];
  /** Where the state directories go. */
  readonly dir: string;
  readonly clusterId: string;
  readonly seeds?: readonly [number, number];
  /** Merged (deeply) into both configs: ops.token, tenants, lease, device.vramBytes, log… */
  readonly common?: Json;
}): Promise<[Json, Json]> {
  const ports = await Promise.all([0, 1, 2, 3, 4, 5].map(() => freePort()));
  const [ga, ra, oa, gb, rb, ob] = ports as [number, number, number, number, number, number];
  const [a, b] = options.names;
  const [sa, sb] = options.seeds ?? [1, 2];
  const node = (
    id: string,
    peer: string,
    role: string,
    own: number[],
    theirs: number[],
    seed: number,
  ) =>
    merge(
      {
        nodeId: id,
        clusterId: options.clusterId,
        role,
        stateDir: join(options.dir, `${id}-state`),
        guest: { listen: `127.0.0.1:${own[0]}` },
        replication: { listen: `127.0.0.1:${own[1]}` },
        ops: { listen: `127.0.0.1:${own[2]}` },
        peer: {
          name: peer,
          guestAddress: `127.0.0.1:${theirs[0]}`,
          replicationAddress: `127.0.0.1:${theirs[1]}`,
        },
        device: { seed },
      },
      options.common ?? {},
    );
  return [
    node(a, b, "primary", [ga, ra, oa], [gb, rb], sa),
    node(b, a, "standby", [gb, rb, ob], [ga, ra], sb),
  ];
}

function merge(base: Json, over: Json): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    const plain = (x: unknown): x is Json =>
      typeof x === "object" && x !== null && !Array.isArray(x);
    out[k] = plain(b) && plain(v) ? merge(b, v) : v;
  }
  return out;
}
