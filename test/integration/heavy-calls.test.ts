// Proves, with real processes and the default 500 ms lease, that a legal call never costs the
// lease: a 1 GiB fill and gemms at the default device.maxKernelWork run on the primary's device
// thread while a second tenant makes small calls, and the pair keeps its epoch, nobody fails
// over, the primary's ops port answers while the device is busy and every small call is
// answered. And that a device that hangs (testing.kernelDelayMs above device.maxCallMs on the
// primary only) makes the primary step down and exit with code 3, the standby take over, and
// the frame in flight — held by the standby until the primary's device did it, which it never
// did — be answered DEVICE_FAULT, never run; restarted, the old primary joins as a standby with
// a fresh device. And that a frame that hangs *every* device (testing.kernelDelayOnly on both
// nodes) takes down only the primary: the standby promotes and stays up, the guest's re-sent
// frame is answered DEVICE_FAULT (a VgpuError) with no effect, the frame queued behind it runs
// exactly once, and the guest's next calls succeed on the new primary. Default mode (sync),
// where the standby holds (replication.holdStandbyDevice).
// Outcomes only: timings are the bench's (npm run bench -- replication, kernel-speed).
import { readFileSync } from "node:fs";
import { buf, Session, u32, VgpuError } from "@vgpu-ha/client";
import { ErrorCode } from "@vgpu-ha/common";
import { afterEach, describe, expect, it } from "vitest";
import { FailoverPair, GUEST } from "../support/failover-pair.js";
import { metrics, sleep, status, waitFor } from "../support/ops-client.js";

const GiB = 2 ** 30;
/** The default device.maxKernelWork (packages/common/src/config/schema.ts). */
const DEFAULT_MAX_KERNEL_WORK = 2 ** 28;
const OTHER = { tenant: "tenant-small", token: "tenant-small-token" };

let pair: FailoverPair | undefined;
afterEach(async () => {
  await pair?.cleanup();
  pair = undefined;
});

const open = (p: FailoverPair, who: { tenant: string; token: string }) =>
  Session.open({ endpoints: p.endpoints, tenant: who.tenant, token: who.token });

/** Small calls (fence) on its own session until `stop`; every answer counted, any error kept. */
function smallCalls(session: Session, context: number) {
  let answered = 0;
  let stopping = false;
  const done = (async () => {
    while (!stopping) {
      await session.fence(context);
      answered++;
    }
  })();
  return {
    get answered() {
      return answered;
    },
    stop: async () => {
      stopping = true;
      await done;
      return answered;
    },
  };
}

describe("heavy calls", () => {
  it("a 1 GiB fill and gemms at the default maxKernelWork keep the lease; the other tenant is answered", async () => {
    pair = await FailoverPair.create({
      device: { vramBytes: "2GiB", thread: "worker" },
      tenants: [
        { name: GUEST.tenant, token: GUEST.token, vramQuotaBytes: "1100MiB" },
        { name: OTHER.tenant, token: OTHER.token, vramQuotaBytes: "16MiB" },
      ],
    });
    await pair.streaming();
    const epoch = (await status(pair.node("a"))).epoch;
    const heavy = await open(pair, GUEST);
    const other = await open(pair, OTHER);
    const otherCtx = await other.createContext();
    const small = smallCalls(other, otherCtx);

    const ctx = await heavy.createContext();
    const big = await heavy.allocBo(ctx, GiB);
    // gemm m = n = 1024, k = 256: exactly the default limit of work.
    const [m, n, k] = [1024, 1024, 256];
    expect(m * n * k).toBe(DEFAULT_MAX_KERNEL_WORK);
    const c = await heavy.allocBo(ctx, m * n * 4);
    const a = await heavy.allocBo(ctx, m * k * 4);
    const b = await heavy.allocBo(ctx, k * n * 4);
    await heavy.launch(ctx, "fill", [buf(a), u32(m * k), u32(0x3f800000)]); // 1.0f
    await heavy.launch(ctx, "fill", [buf(b), u32(k * n), u32(0x40000000)]); // 2.0f
    const answeredBefore = small.answered;

    // The heavy calls, back to back; the ops port is asked while they run.
    let heavyDone = false;
    const heavyCalls = (async () => {
      await heavy.launch(ctx, "fill", [buf(big), u32(GiB / 4), u32(7)]);
      for (let i = 0; i < 3; i++) {
        await heavy.launch(ctx, "gemm_f32", [buf(c), buf(a), buf(b), u32(m), u32(n), u32(k)]);
      }
    })().finally(() => {
      heavyDone = true;
    });
    let statusWhileBusy = 0;
    const statusErrors: unknown[] = [];
    while (!heavyDone) {
      // A fetch may meet a connection reset (a kept-alive socket closed under it): count it,
      // and ask again shortly; whether the node is alive is checked below.
      const s = await status(pair.node("a")).catch((e: unknown) => {
        statusErrors.push(e);
        return undefined;
      });
      if (s !== undefined && !heavyDone) {
        statusWhileBusy++;
        expect(s.role).toBe("primary");
        expect(s.epoch).toBe(epoch);
      }
      await sleep(20);
    }
    await heavyCalls;
    expect(pair.node("a").process.exitCode).toBeNull();
    expect(statusErrors.length).toBeLessThan(statusWhileBusy);
    const answeredDuring = small.answered - answeredBefore;
    // The control plane answered while the device ran the heavy calls, and the other tenant's
    // small calls were answered between them (each waits for the launch ahead of it in the
    // one device queue, no longer).
    expect(statusWhileBusy).toBeGreaterThan(0);
    expect(answeredDuring).toBeGreaterThan(0);

    // The results are right: C = 1·2 summed over k, the 1 GiB buffer holds 7 at its ends.
    const cRow = new Float32Array((await heavy.dmaRead(ctx, c, 0, 16)).slice().buffer);
    expect([...cRow]).toEqual([2 * k, 2 * k, 2 * k, 2 * k]);
    const tail = await heavy.dmaRead(ctx, big, GiB - 4, 4);
    expect(new Uint32Array(tail.slice().buffer)[0]).toBe(7);

    // The other tenant is still answered, no session failed over, the epoch did not move.
    const answeredAfter = small.answered;
    await waitFor("the other tenant answered after the heavy calls", async () => {
      return small.answered > answeredAfter;
    });
    await small.stop();
    // Not asserted: the sessions' resumes. On two shared cores the two device threads' kernels
    // can starve the nodes' main threads past the client's 500 ms gRPC keepalive, and the
    // client then resumes its session on the same primary (transparently, exactly once).
    console.log(`heavy calls: resumes other ${other.resumes}, heavy ${heavy.resumes}`);
    for (const name of ["a", "b"] as const)
      expect((await status(pair.node(name))).epoch).toBe(epoch);
    expect((await status(pair.node("b"))).role).toBe("standby");
    expect((await metrics(pair.node("b"))).get("vgpu_failovers_total")).toBe(0);
    // A launch above the limit is refused before any work (buffers that fit: k = 512).
    await expect(
      heavy.launch(ctx, "gemm_f32", [buf(c), buf(big), buf(big), u32(m), u32(n), u32(2 * k)]),
    ).rejects.toMatchObject({ code: ErrorCode.LIMIT_EXCEEDED });
    await heavy.close();
    await other.close();
  });

  it("a hung device: the primary steps down and exits 3, the standby takes over, the frame in flight is answered DEVICE_FAULT", async () => {
    pair = await FailoverPair.create(
      { device: { vramBytes: "256MiB", thread: "worker" } },
      async ([a]) => {
        // Only the primary's device hangs: it sleeps 3 s before every kernel, past maxCallMs.
        a.device = { ...(a.device as object), maxCallMs: 300 };
        a.testing = { ...(a.testing as object | undefined), kernelDelayMs: 3000 };
      },
    );
    await pair.streaming();
    const nodeA = pair.node("a");
    const session = await open(pair, GUEST);
    const ctx = await session.createContext();
    const counter = await session.allocBo(ctx, 4096);
    // The frame in flight: a non-idempotent increment, so running it twice shows. The standby
    // held it for the primary's device, which never did it: nobody runs it.
    const inFlight = await session
      .launch(ctx, "increment_u32", [buf(counter), u32(1), u32(1)])
      .then(() => "ok" as const)
      .catch((e: unknown) => e);
    expect(inFlight).toBeInstanceOf(VgpuError);
    expect((inFlight as VgpuError).code).toBe(ErrorCode.DEVICE_FAULT);
    expect(await nodeA.exited).toBe(3);
    // It said why, and named the frame in flight (the increment: frame 3 of the session).
    const failed = readFileSync(nodeA.logFile, "utf8")
      .split("\n")
      .filter((l) => l.includes("device failed"))
      .map((l) => JSON.parse(l) as { level: number; reason: string; inFlight: string[] });
    expect(failed).toHaveLength(1);
    expect(failed[0]!.reason).toContain("maxCallMs");
    expect(failed[0]!.inFlight).toEqual([expect.stringMatching(/#3 \(seq \d+\)$/)]);
    const b = await status(pair.node("b"));
    expect(b.role).toBe("primary");
    expect(b.epoch).toBe(2);
    expect(session.epoch).toBe(2);
    const held = new Uint32Array((await session.dmaRead(ctx, counter, 0, 4)).slice().buffer)[0];
    expect(held).toBe(0); // DEVICE_FAULT: the call had no effect
    // The standby heard the failing primary name it.
    expect(
      (await metrics(pair.node("b"))).get("vgpu_device_failures_total", { whose: "peer" }),
    ).toBe(1);
    // The new primary's own device works: the next increment runs, once.
    await session.launch(ctx, "increment_u32", [buf(counter), u32(1), u32(1)]);
    const after = new Uint32Array((await session.dmaRead(ctx, counter, 0, 4)).slice().buffer)[0];
    expect(after).toBe((held ?? 0) + 1);
    await session.close();
    // Restarted (as systemd would), the old primary joins as a standby with a fresh device.
    await pair.start("a");
    await pair.replica("a");
    expect((await status(pair.node("a"))).role).toBe("standby");
  });

  it("a frame that hangs every device takes down only the primary: DEVICE_FAULT reaches the guest, the frame behind it runs once", async () => {
    // Both devices sleep 3 s before every increment_u32 (past maxCallMs), and only then.
    pair = await FailoverPair.create({
      device: { vramBytes: "256MiB", thread: "worker", maxCallMs: 300 },
      testing: { kernelDelayMs: 3000, kernelDelayOnly: "increment_u32" },
    });
    await pair.streaming();
    const nodeA = pair.node("a");
    const nodeB = pair.node("b");
    const session = await open(pair, GUEST);
    const ctx = await session.createContext();
    const counter = await session.allocBo(ctx, 4096);
    const acc = await session.allocBo(ctx, 4096);
    const one = await session.allocBo(ctx, 4096);
    await session.dmaWrite(ctx, one, 0, new Uint8Array(new Uint32Array([1]).buffer));
    const read = async (bo: number) =>
      new Uint32Array((await session.dmaRead(ctx, bo, 0, 4)).slice().buffer)[0];

    // The hanging frame and one queued behind it (acc += 1: running it twice shows), sent
    // together as a guest pipelines them.
    const hung = session
      .launch(ctx, "increment_u32", [buf(counter), u32(1), u32(1)])
      .then(() => "answered ok" as const)
      .catch((e: unknown) => e);
    const behind = session.launch(ctx, "add_u32", [buf(acc), buf(acc), buf(one), u32(1)]);
    const outcome = await hung;
    await behind;
    expect(outcome).toBeInstanceOf(VgpuError);
    expect((outcome as VgpuError).code).toBe(ErrorCode.DEVICE_FAULT);
    expect(await nodeA.exited).toBe(3);
    const b = await status(nodeB);
    expect(b.role).toBe("primary");
    expect(b.epoch).toBe(2);
    expect(session.epoch).toBe(2);

    // The frame had no effect; the one behind it ran exactly once.
    expect(await read(counter)).toBe(0);
    expect(await read(acc)).toBe(1);
    // The new primary never ran the hanging frame: its device did not fail, and it said which
    // frame it answered DEVICE_FAULT at the takeover.
    const notRun = readFileSync(nodeB.logFile, "utf8")
      .split("\n")
      .filter((l) => l.includes("is not run here"));
    expect(notRun).toHaveLength(1);
    expect(notRun[0]).toContain("increment_u32");

    // The guest's next calls succeed on the new primary, which stays up past its own
    // watchdog's limit (it would have fired maxCallMs after a run of the hanging frame).
    await session.launch(ctx, "add_u32", [buf(acc), buf(acc), buf(one), u32(1)]);
    expect(await read(acc)).toBe(2);
    await sleep(1000);
    await session.fence(ctx);
    expect(nodeB.process.exitCode).toBeNull();
    const after = await status(nodeB);
    expect(after.role).toBe("primary");
    expect(after.epoch).toBe(2);
    expect((await metrics(nodeB)).get("vgpu_device_failed")).toBe(0);
    expect((await metrics(nodeB)).get("vgpu_device_failures_total", { whose: "peer" })).toBe(1);
    await session.close();
  });
});
