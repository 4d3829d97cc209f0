// Proves, with real vgpud processes on a host without a GPU, the device backend around the
// webgpu package (a stand-in module, testing.webgpuModule): a webgpu primary and a model standby
// replicate, and the adapter and kernel contract show in status, metrics (vgpu_device_info),
// the peer's hello (the standby's status) and `vgpuctl status`; a webgpu backend that does not
// start (a golden vector differs) stops vgpud with exit 2 naming the kernel, or with
// device.webgpu.onFailure: model runs the model and says why; and a standby whose primary
// announces another kernel contract (testing.kernelContractVersion) refuses it and exits 2.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type SpawnedNode, VGPUD_BIN } from "@vgpu-ha/daemon";
import { afterEach, describe, expect, it } from "vitest";
import { FAKE_ADAPTER, FAKE_WEBGPU_MODULE } from "../support/fake-webgpu.js";
import { openAndRun } from "../support/guest-workload.js";
import { digest, metrics, status, waitFor } from "../support/ops-client.js";
import { GUESTS, ReplicationPair } from "../support/replication-pair.js";
import { spawnTracked } from "../support/temp-node.js";
import { vgpuctl } from "../support/vgpuctl.js";

const WEBGPU = { device: { backend: "webgpu" }, testing: { webgpuModule: FAKE_WEBGPU_MODULE } };

let pair: ReplicationPair | undefined;
const nodes: SpawnedNode[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await pair?.stop();
  pair = undefined;
  await Promise.all(nodes.splice(0).map((n) => n.stop(3000)));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("device.backend webgpu (a stand-in module)", () => {
  it("a webgpu primary and a model standby replicate; the adapter shows everywhere", async () => {
    pair = await ReplicationPair.start({ primary: WEBGPU });
    await pair.waitInSync();
    const { report, session } = await openAndRun(
      { endpoint: pair.primary.guest, ...GUESTS.workload },
      17,
      150,
    );
    await session.close();
    expect(report.mismatches).toEqual([]);
    expect(await pair.verify()).toMatchObject({ equal: true });
    const [dp, ds] = await waitFor("the standby at the primary's seq", async () => {
      const both = await Promise.all([digest(pair!.primary), digest(pair!.liveStandby)]);
      return both[0].seq === both[1].seq ? both : undefined;
    });
    expect(ds.gpu).toBe(dp.gpu);

    const [p, s] = await Promise.all([status(pair.primary), status(pair.liveStandby)]);
    const gpu = "webgpu fakevendor fake-gpu-1 (fakearch, driver 0.0.1, webgpu 0.0.0-fake)";
    expect(p.device).toMatchObject({
      backend: "webgpu",
      adapter: FAKE_ADAPTER,
      description: gpu,
      failed: false,
    });
    expect(s.device).toMatchObject({ backend: "model", adapter: null, description: "model" });
    expect(p.kernelContractVersion).toBe(s.kernelContractVersion);
    // Each learnt the other's device from its hello.
    expect(s.replication?.peerVersion).toMatchObject({
      kernelContract: p.kernelContractVersion,
      device: gpu,
    });
    expect(p.replication?.peerVersion).toMatchObject({ device: "model" });

    const m = await metrics(pair.primary);
    const info = {
      backend: "webgpu",
      kernel_contract: String(p.kernelContractVersion),
      vendor: "fakevendor",
      device: "fake-gpu-1",
      driver: "0.0.1",
      webgpu: "0.0.0-fake",
    };
    expect(m.get("vgpu_device_info", info)).toBe(1);
    expect((await metrics(pair.liveStandby)).get("vgpu_device_info", { backend: "model" })).toBe(1);

    const out = vgpuctl("--node", pair.primary.ops, "--node", pair.liveStandby.ops, "status");
    expect(out.code, out.err).toBe(0);
    expect(out.out).toContain(`node-p: device ${gpu} (kernel contract ${p.kernelContractVersion})`);
  });

  it("a golden vector that differs stops vgpud with exit 2 naming the kernel", () => {
    const dir = mkdtempSync(join(tmpdir(), "vgpu-webgpu-"));
    dirs.push(dir);
    const file = join(dir, "gpu-node.json");
    const config = {
      nodeId: "gpu-node",
      role: "standalone",
      stateDir: join(dir, "state"),
      guest: { listen: "127.0.0.1:0" },
      ops: { listen: "127.0.0.1:0" },
      ...WEBGPU,
    };
    writeFileSync(file, JSON.stringify(config));
    const failure = "golden vector reduce_sum_f32 (n = 2049): GPU hash 1a2b, model hash 3c4d";
    const vgpud = (...args: string[]) =>
      spawnSync(process.execPath, [VGPUD_BIN, "--config", file, ...args], {
        encoding: "utf8",
        timeout: 30_000,
        env: { ...process.env, FAKE_WEBGPU_FAIL: failure },
      });
    const run = vgpud();
    expect(run.status).toBe(2);
    expect(run.stderr).toContain(`vgpud: device.backend webgpu did not start: ${failure}`);
    expect(run.stdout).toContain('"msg":"the device did not start"');
    const check = vgpud("--check-gpu");
    expect(check.status).toBe(2);
    expect(check.stderr).toContain(failure);
    const ok = spawnSync(process.execPath, [VGPUD_BIN, "--config", file, "--check-gpu"], {
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toContain(
      "vgpud: webgpu fakevendor fake-gpu-1 (fakearch, driver 0.0.1, webgpu 0.0.0-fake): " +
        "golden vectors equal to the model's",
    );
  });

  it("with onFailure: model it runs the CPU model and says why", async () => {
    const dir = mkdtempSync(join(tmpdir(), "vgpu-webgpu-"));
    dirs.push(dir);
    const node = await spawnTracked({
      dir,
      name: "gpu-node",
      config: {
        nodeId: "gpu-node",
        role: "standalone",
        guest: { listen: "127.0.0.1:0" },
        ops: { listen: "127.0.0.1:0" },
        ...WEBGPU,
        device: { backend: "webgpu", webgpu: { onFailure: "model" } },
      },
      env: { ...process.env, FAKE_WEBGPU_FAIL: "no WebGPU adapter found" },
    });
    nodes.push(node);
    const s = await status(node);
    expect(s.device).toMatchObject({
      backend: "model",
      fallbackReason: "device.backend webgpu did not start: no WebGPU adapter found",
    });
    const out = vgpuctl("--node", node.ops, "status");
    expect(out.out).toContain("gpu-node: device model (kernel contract");
    expect(out.out).toContain("FALLBACK (device.backend webgpu did not start");
  });
});

describe("a primary of another kernel contract", () => {
  it("is refused by the standby, which exits 2; both show and count it", async () => {
    pair = await ReplicationPair.start({ primary: { testing: { kernelContractVersion: 99 } } });
    const standby = pair.liveStandby;
    const code = await Promise.race([
      standby.exited,
      new Promise((r) => setTimeout(() => r("still running"), 20_000)),
    ]);
    expect(code).toBe(2);
    const log = readFileSync(standby.logFile, "utf8");
    expect(log).toContain("the primary's device runs another kernel contract: this node stops");
    expect(log).toContain('peer \\"node-p\\" runs kernel contract 99 (model)');
    const p = await status(pair.primary);
    expect(p.kernelContractVersion).toBe(99);
    expect(p.replication?.state).not.toBe("streaming");
    expect(p.replication?.peerVersion?.kernelContract).not.toBe(99);
    const m = await metrics(pair.primary);
    expect(
      m.get("vgpu_replication_refusals_total", {
        reason: "incompatible_contract",
        direction: "outbound",
      }),
    ).toBeGreaterThanOrEqual(1);
  });
});
