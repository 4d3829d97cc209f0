// Proves the node-wide bound on what incomplete guest messages make a real vgpud hold
// (docs/security.md, "Memory a guest can make the node hold"): raw HTTP/2 streams from another
// loopback source (127.0.0.2, 127.0.0.3) send gRPC prefixes announcing 64 MiB and then only
// part of it, and the node's resident memory is sampled from its /metrics while they hold it.
// Without the bound the node holds all they send (about 390 MiB for the first attack below).
// With it: streams that have sent no Open are reset past guest.maxIncompleteBytesBeforeOpen
// (defaults); authenticated sessions past their source's and the node's budgets (small budgets
// here), their resident memory growth stays within maxIncompleteBytesTotal plus a stated slack,
// every reset is counted (vgpu_guest_refusals_total{reason="incomplete_bytes"}) and logged,
// and an honest guest on 127.0.0.1 is served correct DMA results all along. Also: a connection
// that carries no stream within guest.openTimeoutMs (a valid preface and SETTINGS, then
// nothing) is closed and counted, and one that sends bytes nghttp2 refuses after the preface,
// then half-closes, no longer stays open.
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { Session } from "@vgpu-ha/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type IncompleteMessagesAttack,
  incompleteMessages,
} from "../support/incomplete-messages.js";
import { Metrics } from "../support/ops-client.js";
import { startNode, TENANTS } from "../support/temp-node.js";

const MiB = 1024 ** 2;
const ALPHA = { tenant: TENANTS[0]!.name, token: TENANTS[0]!.token };
/**
 * What resident memory may grow by beyond the budget: the buffers of reset streams the node has
 * let go and not yet collected (freed memory the allocator keeps for reuse counts as resident
 * too), HTTP/2 and gRPC bookkeeping per stream, the honest guest's work. Measured on a busy
 * 2-core machine: 20-25 MiB for the first attack, 60-80 MiB over the budget for the second;
 * repeated six times in a row, the second stays at 180-200 MiB over rest (budget 96 MiB).
 */
const SLACK_BYTES = 128 * MiB;

type Started = Awaited<ReturnType<typeof startNode>>;

const metrics = async (ops: string) => new Metrics(await (await fetch(`${ops}/metrics`)).text());

/** Samples the node's resident memory every 50 ms until stopped; the largest seen. */
function sampleRss(ops: string): { stop(): Promise<number> } {
  let peak = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      peak = Math.max(peak, (await metrics(ops)).get("process_resident_memory_bytes"));
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return peak;
    },
  };
}

/** Resident memory at rest: the median of five samples. */
async function restingRss(ops: string): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < 5; i++) {
    samples.push((await metrics(ops)).get("process_resident_memory_bytes"));
    await new Promise((r) => setTimeout(r, 50));
  }
  return samples.sort((a, b) => a - b)[2]!;
}

/**
 * An honest guest on 127.0.0.1 writing and reading back 64 KiB patterns, about a hundred a
 * second, until stopped; each read must equal what was written.
 */
async function honestGuest(node: Started["node"]) {
  const session = await Session.open({ endpoint: node.guest, ...ALPHA, clusterId: "memory" });
  const ctx = await session.createContext();
  const bo = await session.allocBo(ctx, 64 * 1024);
  let rounds = 0;
  let wrong = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const pattern = new Uint8Array(64 * 1024).fill(rounds % 251);
      await session.dmaWrite(ctx, bo, 0, pattern);
      const back = await session.dmaRead(ctx, bo, 0, pattern.length);
      if (!Buffer.from(back).equals(Buffer.from(pattern))) wrong++;
      rounds++;
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  return {
    rounds: () => rounds,
    stop: async () => {
      running = false;
      await loop;
      await session.close();
      return { rounds, wrong };
    },
  };
}

/** Runs `attack` beside an honest guest; what the node's memory, the guest and the attacker saw. */
async function underAttack(
  node: Started["node"],
  attack: () => Promise<IncompleteMessagesAttack[]>,
) {
  const guest = await honestGuest(node);
  while (guest.rounds() < 3) await new Promise((r) => setTimeout(r, 10)); // warmed up
  const before = await restingRss(node.ops);
  const roundsBefore = guest.rounds();
  const sampler = sampleRss(node.ops);
  const attacks = await attack();
  // Hold what the node took for a second, then let go.
  await new Promise((r) => setTimeout(r, 1000));
  const held = (await metrics(node.ops)).get("vgpu_guest_incomplete_message_bytes");
  const peak = await sampler.stop();
  const roundsDuring = guest.rounds() - roundsBefore;
  for (const a of attacks) a.close();
  const honest = await guest.stop();
  return {
    growth: peak - before,
    held,
    roundsDuring,
    honest,
    results: attacks.map((a) => a.result),
  };
}

/** The node's log once it holds a line matching `pattern` (stderr reaches the file late). */
async function logMatching(file: string, pattern: RegExp): Promise<string> {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const log = readFileSync(file, "utf8");
    if (pattern.test(log) || performance.now() > deadline) return log;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("streams that never send Open, against the defaults", () => {
  let started: Started;
  beforeAll(async () => {
    started = await startNode({ clusterId: "memory", log: { level: "info" } });
  });
  afterAll(async () => {
    await started?.cleanup();
  });

  it("are reset at their small allowance; the node holds none of the 384 MiB sent", async () => {
    const { node } = started;
    const seen = await underAttack(node, async () => [
      await incompleteMessages({
        target: node.guest,
        localAddress: "127.0.0.2",
        streams: 12,
        connections: 2,
        announceBytes: 64 * MiB,
        sendBytes: 32 * MiB,
      }),
    ]);
    const said = JSON.stringify(seen);
    console.log(`never-open attack: ${said}`);
    const result = seen.results[0]!;
    // 12 streams allowed 256 KiB each at most, plus the slack: not the 384 MiB they sent.
    expect(seen.growth, said).toBeLessThan(12 * 256 * 1024 + SLACK_BYTES);
    expect(result.resets["ENHANCE_YOUR_CALM"], said).toBe(12);
    expect(result.streamsHolding, said).toBe(0);
    // Only what the honest guest's decoder keeps of its last small message is held.
    expect(seen.held, said).toBeLessThan(MiB);
    expect(seen.honest.wrong, said).toBe(0);
    expect(seen.roundsDuring, said).toBeGreaterThan(0);
    const m = await metrics(node.ops);
    expect(m.get("vgpu_guest_refusals_total", { reason: "incomplete_bytes" })).toBe(12);
    const line = /"msg":"guest refused: incomplete_bytes from 127\.0\.0\.2"/;
    const log = await logMatching(node.logFile, line);
    expect(log).toMatch(line);
    expect(log).toContain("guest.maxIncompleteBytesBeforeOpen");
  }, 120_000);
});

describe("authenticated sessions from two sources, against small budgets", () => {
  const PER_SOURCE = 64 * MiB;
  const TOTAL = 96 * MiB;
  let started: Started;
  beforeAll(async () => {
    started = await startNode({
      clusterId: "memory",
      log: { level: "info" },
      guest: {
        listen: "127.0.0.1:0",
        openTimeoutMs: 1000,
        maxIncompleteBytesPerSource: PER_SOURCE,
        maxIncompleteBytesTotal: TOTAL,
      },
    });
  });
  afterAll(async () => {
    await started?.cleanup();
  });

  it("are reset past their source's and the node's budgets while an honest guest is served", async () => {
    const { node } = started;
    const seen = await underAttack(node, () =>
      Promise.all(
        ["127.0.0.2", "127.0.0.3"].map((localAddress) =>
          incompleteMessages({
            target: node.guest,
            localAddress,
            open: ALPHA,
            streams: 8,
            connections: 2,
            announceBytes: 64 * MiB,
            sendBytes: 24 * MiB,
          }),
        ),
      ),
    );
    const said = JSON.stringify(seen);
    console.log(`authenticated attack: ${said}`);
    // They sent 2 x 8 x 24 MiB = 384 MiB; the node keeps at most its budget of them.
    expect(seen.growth, said).toBeLessThan(TOTAL + SLACK_BYTES);
    expect(seen.held, said).toBeLessThanOrEqual(TOTAL);
    const resets = seen.results.reduce((n, r) => n + (r.resets["ENHANCE_YOUR_CALM"] ?? 0), 0);
    expect(resets, said).toBeGreaterThan(0);
    expect(seen.honest.wrong, said).toBe(0);
    expect(seen.roundsDuring, said).toBeGreaterThan(0);
    const m = await metrics(node.ops);
    expect(m.get("vgpu_guest_refusals_total", { reason: "incomplete_bytes" })).toBe(resets);
    const line = /"msg":"guest refused: incomplete_bytes from 127\.0\.0\.[23]"/;
    expect(await logMatching(node.logFile, line)).toMatch(line);
  }, 120_000);

  it("closes a connection that half-closes after bytes that never become a stream", async () => {
    const { node } = started;
    const port = Number(node.guest.slice(node.guest.lastIndexOf(":") + 1));
    const refusals = async (reason: string) =>
      (await metrics(node.ops)).get("vgpu_guest_refusals_total", { reason });
    /** Sends the bytes (then half-closes if told), and how long the node took to close it. */
    const halfClose = async (
      localAddress: string,
      frames: Buffer[],
      end: boolean,
    ): Promise<number> => {
      const socket = connect({ host: "127.0.0.1", port, localAddress, allowHalfOpen: true });
      socket.on("error", () => undefined);
      socket.on("data", () => undefined);
      const t0 = performance.now();
      const ended = new Promise<number>((resolve) => {
        socket.once("end", () => resolve(performance.now() - t0));
        socket.once("close", () => resolve(performance.now() - t0));
      });
      try {
        await new Promise<void>((resolve) => socket.once("connect", resolve));
        socket.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        socket.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])); // an empty SETTINGS
        for (const f of frames) socket.write(f);
        if (end) socket.end(); // the write side ends, the read side stays
        return await Promise.race([
          ended,
          new Promise<number>((r) => setTimeout(() => r(Number.POSITIVE_INFINITY), 10_000)),
        ]);
      } finally {
        socket.destroy();
      }
    };
    // A valid preface and SETTINGS, then nothing, the socket left open: no stream ever comes,
    // so only the open timeout can close it (guest.openTimeoutMs is 1000 here).
    const timeoutsBefore = await refusals("open_timeout");
    expect(await halfClose("127.0.0.4", [], false)).toBeLessThan(5000);
    expect(await refusals("open_timeout")).toBeGreaterThan(timeoutsBefore);
    // Then a frame of a type HTTP/2 does not know, with a bad length, and the half-close (it
    // stayed open before the open timeout existed, on this box): Node closes such a session
    // itself on some hosts (CI, in 38-78 ms) and leaves it to the open timeout on others.
    const before = await refusals("open_timeout");
    const garbage = Buffer.from([0xff, 0xff, 0xff, 0x0a, 0, 0, 0, 0, 1, 1, 2, 3]);
    const closedAfterMs = await halfClose("127.0.0.5", [garbage], true);
    expect(closedAfterMs).toBeLessThan(5000);
    if (closedAfterMs >= 1000) expect(await refusals("open_timeout")).toBeGreaterThan(before);
  }, 30_000);
});
