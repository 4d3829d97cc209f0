// The etcd the system tests start: a real server on loopback that answers a put and a get,
// and is gone after stop().
import { afterAll, describe, expect, it } from "vitest";
import { type EtcdServer, startEtcd } from "../support/etcd.js";
import { requireBinary } from "../support/external.js";

const etcd = requireBinary("etcd", "etcd-server");

describe.skipIf(!etcd)("a test etcd", () => {
  let server: EtcdServer | undefined;
  afterAll(async () => server?.stop());

  it("serves the v3 API on loopback and stops", async () => {
    server = await startEtcd(etcd);
    const key = Buffer.from("vgpu-test/k").toString("base64");
    const put = await fetch(`${server.endpoint}/v3/kv/put`, {
      method: "POST",
      body: JSON.stringify({ key, value: Buffer.from("v").toString("base64") }),
    });
    expect(put.status).toBe(200);
    const got = (await (
      await fetch(`${server.endpoint}/v3/kv/range`, {
        method: "POST",
        body: JSON.stringify({ key }),
      })
    ).json()) as { kvs: { value: string }[] };
    expect(Buffer.from(got.kvs[0]!.value, "base64").toString()).toBe("v");
    const pid = server.process.pid!;
    await server.stop();
    expect(() => process.kill(pid, 0)).toThrow();
  });
});
