// Proves the standard gRPC health service (grpc.health.v1.Health) on a real pair, asked by a
// grpc-js health client: the guest port is SERVING on the primary and NOT_SERVING on the
// standby, the replication port the other way round; both follow the roles through a planned
// switchover and through a failover (the primary SIGKILLed), which vgpu_failovers_total counts.
// In the default (sync) mode only: health follows the roles, not the replication mode.
import * as grpc from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import { afterAll, describe, expect, it } from "vitest";
import { ADMIN, FailoverPair, type NodeName } from "../support/failover-pair.js";
import { metrics, status, waitFor } from "../support/ops-client.js";

const GUEST = "vgpu.v1.Guest";
const REPLICATION = "vgpu.v1.Replication";

type HealthClient = grpc.Client & {
  check(
    request: { service: string },
    options: grpc.CallOptions,
    callback: (err: grpc.ServiceError | null, res?: { status: string }) => void,
  ): void;
};
const HealthClient = grpc.makeClientConstructor(
  healthService as unknown as grpc.ServiceDefinition,
  "Health",
) as unknown as new (
  address: string,
  credentials: grpc.ChannelCredentials,
) => HealthClient;

/** The status Health.Check answers for `service` at `address`, or the gRPC error code. */
async function check(address: string, service: string): Promise<string> {
  const client = new HealthClient(address, grpc.credentials.createInsecure());
  try {
    return await new Promise<string>((resolve, reject) =>
      client.check({ service }, { deadline: Date.now() + 5000 }, (err, res) => {
        if (err) {
          if (err.code === grpc.status.NOT_FOUND) resolve("NOT_FOUND");
          else reject(err);
        } else resolve(res!.status);
      }),
    );
  } finally {
    client.close();
  }
}

/** What both ports of a node say: [guest "", guest service, replication "", replication service]. */
async function ports(pair: FailoverPair, name: NodeName): Promise<string[]> {
  const n = pair.node(name);
  return Promise.all([
    check(n.guest, ""),
    check(n.guest, GUEST),
    check(n.replication!, ""),
    check(n.replication!, REPLICATION),
  ]);
}

const PRIMARY = ["SERVING", "SERVING", "NOT_SERVING", "NOT_SERVING"];
const STANDBY = ["NOT_SERVING", "NOT_SERVING", "SERVING", "SERVING"];

const streaming = (pair: FailoverPair, name: NodeName) =>
  waitFor(
    `${name} streaming to its standby`,
    async () => (await status(pair.node(name))).replication?.state === "streaming",
    { timeoutMs: 20_000 },
  );

let pair: FailoverPair | undefined;
afterAll(async () => pair?.cleanup());

describe("gRPC health", () => {
  it("serves per role, and follows a switchover and a failover", async () => {
    pair = await FailoverPair.create();
    const p = pair;
    await streaming(p, "a");
    expect(await ports(p, "a")).toEqual(PRIMARY);
    expect(await ports(p, "b")).toEqual(STANDBY);
    expect(await check(p.node("a").guest, "no.such.Service")).toBe("NOT_FOUND");

    const res = await fetch(`${p.node("a").ops}/v1/switchover`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(res.status, await res.text()).toBe(200);
    await waitFor("b primary, a its standby", async () => {
      const [a, b] = await Promise.all([ports(p, "a"), ports(p, "b")]);
      return JSON.stringify([a, b]) === JSON.stringify([STANDBY, PRIMARY]);
    });
    expect((await metrics(p.node("b"))).get("vgpu_failovers_total")).toBe(0);

    await streaming(p, "b");
    // Only a standby holding the new primary's sync grant takes over (streaming comes first;
    // under load the grant can follow it by more than a lease).
    await waitFor(
      "a an eligible replica of b",
      async () => (await status(p.node("a"))).replication?.eligible === true,
      { timeoutMs: 20_000 },
    );
    p.node("b").process.kill("SIGKILL");
    await waitFor(
      "a takes over",
      async () => JSON.stringify(await ports(p, "a")) === JSON.stringify(PRIMARY),
      { timeoutMs: 15_000 },
    );
    expect((await status(p.node("a"))).role).toBe("primary");
    expect((await metrics(p.node("a"))).get("vgpu_failovers_total")).toBe(1);
  });
});
