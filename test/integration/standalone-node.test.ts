// Proves a standalone vgpud serves guests end to end: a real process over loopback TCP,
// concurrent sessions running every call kind and MMIO stores with results checked on the
// host, bad input refused with typed codes while the node keeps serving, and a clean SIGTERM;
// with the device inline and on its own thread (device.thread, issue #14).
import * as grpc from "@grpc/grpc-js";
import { buf, ErrorCode, f32, runDemo, Session, SessionClosedError, u32 } from "@vgpu-ha/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawStream } from "../support/raw-grpc.js";
import { startNode, TENANTS } from "../support/temp-node.js";

const alpha = { tenant: TENANTS[0]!.name, token: TENANTS[0]!.token };
const beta = { tenant: TENANTS[1]!.name, token: TENANTS[1]!.token };

let started: Awaited<ReturnType<typeof startNode>>;

const open = (who: typeof alpha) => Session.open({ endpoint: started.node.guest, ...who });

/** A seeded workload of every call kind plus stores, checked against a host-side model. */
async function mixedWorkload(session: Session, seed: number): Promise<number> {
  let state = seed;
  const rand = (n: number) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return Math.floor(((state >>> 8) / 2 ** 24) * n);
  };
  const ctx = await session.createContext();
  const size = 16 * 1024;
  const bos = [await session.allocBo(ctx, size), await session.allocBo(ctx, size)];
  const host = bos.map(() => new Uint8Array(size));
  const mapped = await session.map(ctx, bos[0]!, size);
  let checks = 0;
  for (let i = 0; i < 300; i++) {
    const which = rand(2);
    const bo = bos[which]!;
    const mem = host[which]!;
    switch (rand(6)) {
      case 0: {
        const off = rand(size / 4) * 4;
        const data = new Uint8Array(Math.min(256, size - off)).map(() => rand(256));
        await session.dmaWrite(ctx, bo, off, data);
        mem.set(data, off);
        break;
      }
      case 1: {
        // An MMIO store, not awaited: the next call must still see it (store/call order).
        const off = rand(size / 4) * 4;
        const value = rand(2 ** 32);
        mapped.writeU32(off, value);
        new DataView(host[0]!.buffer).setUint32(off, value, true);
        break;
      }
      case 2: {
        const n = 1 + rand(size / 4);
        await session.launch(ctx, "increment_u32", [buf(bo), u32(n), u32(3)]);
        const v = new DataView(mem.buffer);
        for (let k = 0; k < n; k++) v.setUint32(k * 4, (v.getUint32(k * 4, true) + 3) >>> 0, true);
        break;
      }
      case 3: {
        const len = 4 * (1 + rand(512));
        const src = rand(2);
        await session.copy(
          ctx,
          { bo: bos[src]!, offset: 0 },
          { bo: bos[1 - src]!, offset: 0 },
          len,
        );
        host[1 - src]!.set(host[src]!.subarray(0, len), 0);
        break;
      }
      case 4: {
        const off = rand(size / 4) * 4;
        const len = Math.min(1024, size - off);
        const got = await session.dmaRead(ctx, bo, off, len);
        expect(Buffer.from(got).equals(Buffer.from(mem.subarray(off, off + len)))).toBe(true);
        checks++;
        break;
      }
      default:
        await session.fence(ctx);
    }
  }
  for (const [i, bo] of bos.entries()) {
    const got = await session.dmaRead(ctx, bo, 0, size);
    expect(Buffer.from(got).equals(Buffer.from(host[i]!))).toBe(true);
    checks++;
  }
  return checks;
}

describe.each(["inline", "worker"] as const)("standalone vgpud (device.thread %s)", (thread) => {
  beforeAll(async () => {
    started = await startNode({ device: { seed: 7, vramBytes: "512MiB", thread } });
  });
  afterAll(async () => {
    await started?.cleanup();
  });

  it("gives the state digest on the ops port", async () => {
    const session = await open(alpha);
    const ctx = await session.createContext();
    await session.dmaWrite(ctx, await session.allocBo(ctx, 4096), 0, Uint8Array.of(1, 2, 3));
    const digest = (await (await fetch(`${started.node.ops}/v1/digest`)).json()) as Record<
      string,
      unknown
    >;
    expect(digest.gpu).toMatch(/^[0-9a-f]{64}$/);
    await session.close();
  });

  it("serves the demo guest with every result correct", async () => {
    const session = await open(alpha);
    const steps: boolean[] = [];
    expect(await runDemo(session, (s) => steps.push(s.ok))).toBe(true);
    expect(steps.length).toBeGreaterThan(8);
    await session.close();
  });

  it("runs concurrent sessions of a mixed workload with host-checked results", async () => {
    const sessions = await Promise.all([open(alpha), open(alpha), open(beta)]);
    const checks = await Promise.all(sessions.map((s, i) => mixedWorkload(s, 11 + i)));
    for (const c of checks) expect(c).toBeGreaterThan(10);
    await Promise.all(sessions.map((s) => s.close()));
  });

  it("answers every outstanding frame before Closed, even past the in-flight window", async () => {
    const session = await Session.open({
      endpoint: started.node.guest,
      ...alpha,
      maxFramesInFlight: 8,
    });
    const ctx = await session.createContext();
    const fences = Array.from({ length: 100 }, () => session.fence(ctx));
    await session.close();
    expect(await Promise.all(fences)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
  });

  it("pipelines many frames and answers each once, in order", async () => {
    const session = await open(alpha);
    const ctx = await session.createContext();
    const fences = await Promise.all(Array.from({ length: 5000 }, () => session.fence(ctx)));
    expect(fences).toEqual(Array.from({ length: 5000 }, (_, i) => i + 1));
    await session.close();
  });

  it("refuses bad calls with typed codes and keeps serving", async () => {
    const session = await open(alpha);
    const ctx = await session.createContext();
    const bo = await session.allocBo(ctx, 4096);
    const code = async (p: Promise<{ code: number }>) => (await p).code;
    expect(await code(session.call({ op: "boAlloc", context: 424242, sizeBytes: 10 }))).toBe(
      ErrorCode.UNKNOWN_CONTEXT,
    );
    expect(
      await code(session.call({ op: "dmaRead", context: ctx, bo, offset: 4000, length: 200 })),
    ).toBe(ErrorCode.OUT_OF_BOUNDS);
    expect(
      await code(session.call({ op: "kernelLaunch", context: ctx, kernel: "nope", args: [] })),
    ).toBe(ErrorCode.UNKNOWN_KERNEL);
    expect(
      await code(
        session.call({
          op: "kernelLaunch",
          context: ctx,
          kernel: "fill",
          args: [u32(1), u32(1), f32(1)],
        }),
      ),
    ).toBe(ErrorCode.BAD_KERNEL_ARGS);
    expect(
      await code(
        session.storeBatch({
          context: ctx,
          bo,
          offsets: [0],
          widths: new Uint8Array([4]),
          data: new Uint8Array(4),
        }),
      ),
    ).toBe(ErrorCode.NOT_MAPPED);
    // what cannot go on the wire is refused at once, as a typed error, not a crash
    for (const bad of [
      { op: "dmaRead", context: ctx, bo, offset: 1.5, length: 4 },
      { op: "dmaRead", context: ctx, bo, offset: -1, length: 4 },
      { op: "boFree", context: ctx, bo: 2 ** 32 },
      { op: "kernelLaunch", context: ctx, kernel: "fill", args: [{ kind: "i32", value: 2 ** 31 }] },
    ] as const) {
      await expect(session.call(bad)).rejects.toMatchObject({ code: ErrorCode.MALFORMED });
    }
    // DMA data is taken when the call is made: reusing the array afterwards changes nothing
    const data = new Uint8Array([1, 2, 3, 4]);
    const written = session.dmaWrite(ctx, bo, 0, data);
    data.fill(9);
    await written;
    expect([...(await session.dmaRead(ctx, bo, 0, 4))]).toEqual([1, 2, 3, 4]);
    // still serving
    expect(await session.fence(ctx)).toBe(1);
    await session.close();
  });

  it("keeps tenants apart: another tenant's context is unknown", async () => {
    const a = await open(alpha);
    const b = await open(beta);
    const ctxA = await a.createContext();
    const r = await b.call({ op: "boAlloc", context: ctxA, sizeBytes: 4096 });
    expect(r.code).toBe(ErrorCode.UNKNOWN_CONTEXT);
    await Promise.all([a.close(), b.close()]);
  });

  it("refuses unknown tenants and wrong tokens alike", async () => {
    const wrong = open({ tenant: alpha.tenant, token: "not-the-token" });
    await expect(wrong).rejects.toBeInstanceOf(SessionClosedError);
    await expect(wrong).rejects.toMatchObject({ code: ErrorCode.UNAUTHENTICATED });
    await expect(open({ tenant: "nobody", token: "whatever-token" })).rejects.toMatchObject({
      code: ErrorCode.UNAUTHENTICATED,
    });
  });

  it("survives malformed protobuf bytes on the guest stream", async () => {
    const { client: raw, stream } = rawStream(started.node.guest, "/vgpu.v1.Guest/Session");
    const status = new Promise<grpc.StatusObject>((resolve) => stream.on("status", resolve));
    stream.on("error", () => undefined);
    stream.on("data", () => undefined);
    stream.write(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02]));
    stream.end();
    expect((await status).code).not.toBe(grpc.status.OK);
    raw.close();
    const session = await open(alpha);
    expect(await session.createContext()).toBeGreaterThan(0);
    await session.close();
  });

  it("reports itself on the ops port", async () => {
    const status = (await (await fetch(`${started.node.ops}/v1/status`)).json()) as Record<
      string,
      unknown
    >;
    expect(status).toMatchObject({ role: "standalone", epoch: 1, serving: true });
    const ready = await fetch(`${started.node.ops}/readyz`);
    expect(ready.status).toBe(200);
    const metrics = await (await fetch(`${started.node.ops}/metrics`)).text();
    expect(metrics).toMatch(/^vgpu_calls_total\{op="kernelLaunch",code="OK"\} \d+$/m);
  });

  it("stops cleanly on SIGTERM (exit 0)", async () => {
    const extra = await startNode();
    const session = await Session.open({ endpoint: extra.node.guest, ...alpha });
    await session.createContext();
    expect(await extra.node.stop()).toBe(0);
    await extra.cleanup();
  });
});
