// Proves the guest service's defences in memory (testing/guest-harness.ts: fake streams, a real
// backend and sequencer): unknown tenants and wrong credentials get one answer; a client
// certificate opens only its tenant; another tenant's context or buffer answers exactly as an
// unknown one; session counts and the open rate are limited, resumes are not; the frames limit
// and a half-close keep their order; one tenant's backlog does not hold up another's frames;
// and a tenant past its budget of refused frames waits for it to refill; a session without a
// stream for sessionIdleMs is reaped through the log (quota freed, its resume SESSION_EXPIRED),
// and an operator's close ends an attached stream the same way.
import { create } from "@bufbuild/protobuf";
import { type Call, decodeResult, ErrorCode, encodeFrame, wire as w } from "@vgpu-ha/common";
import type { BackendOptions } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { type FakeGuestStream, guestHarness } from "./testing/guest-harness.js";

const BACKEND: BackendOptions = {
  device: { seed: 3, vramBytes: 64 << 20, maxBoBytes: 4 << 20, maxKernelWork: 1 << 24 },
  tenants: new Map([
    ["a", { vramBytes: 16 << 20, bos: 64, contexts: 8 }],
    ["b", { vramBytes: 16 << 20, bos: 64, contexts: 8 }],
    ["c", { vramBytes: 16 << 20, bos: 64, contexts: 8 }],
  ]),
  session: { replyCacheFrames: 4096, replyCacheBytes: 1 << 24 },
  maxDmaBytes: 1 << 20,
  maxStoresPerBatch: 1024,
  trackMmio: false,
};
const TENANTS = [
  { name: "a", token: "token-of-a-0001" },
  { name: "b", token: "token-of-b-0002" },
  { name: "c", certificateName: "guest-c" },
];
const cert = (name: string) => ({ subject: { CN: name } as never, subjectaltname: `DNS:${name}` });

const open = (tenant: string, token: string, resumeSessionId = "") =>
  create(w.GuestMessageSchema, {
    kind: { case: "open", value: { tenant, token, resumeSessionId } },
  });
const frames = (first: number, calls: readonly Call[]) =>
  create(w.GuestMessageSchema, {
    kind: {
      case: "frames",
      value: {
        frames: calls.map((call, i) =>
          encodeFrame({ number: first + i, body: { kind: "call", call } }),
        ),
      },
    },
  });

/** What the node wrote to a stream, as plain data. */
function answers(s: FakeGuestStream) {
  return s.written.map((m) => m.kind);
}
const sessionError = (s: FakeGuestStream) => {
  const last = s.written.at(-1)?.kind;
  return last?.case === "error"
    ? { code: last.value.code, message: last.value.message }
    : undefined;
};
function results(s: FakeGuestStream) {
  return s.written.flatMap((m) =>
    m.kind.case === "acks" ? m.kind.value.results.map((r) => decodeResult(r.result)) : [],
  );
}

/** A stream with an open session of `tenant`. */
function opened(h: ReturnType<typeof guestHarness>, tenant: string, token: string) {
  const s = h.connect();
  s.send(open(tenant, token));
  const first = s.written[0]?.kind;
  if (first?.case !== "opened") throw new Error(`not opened: ${JSON.stringify(first)}`);
  return { stream: s, id: first.value.sessionId };
}

describe("guest authentication", () => {
  it("answers an unknown tenant, a wrong token and a certificate tenant without one alike", () => {
    const h = guestHarness({ backend: BACKEND, tenants: TENANTS });
    const refusals = [
      ["nobody", "token-of-a-0001"],
      ["a", "token-of-b-0002"],
      ["a", ""],
      ["c", ""],
      ["c", "anything-at-all"],
    ].map(([tenant, token]) => {
      const s = h.connect();
      s.send(open(tenant!, token!));
      expect(s.ended).toBe(true);
      return sessionError(s);
    });
    expect(new Set(refusals.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(refusals[0]).toEqual({
      code: ErrorCode.UNAUTHENTICATED,
      message: "unknown tenant or wrong token",
    });
    expect(h.backend.sessions.size).toBe(0);
  });

  it("opens a tenant by the client certificate that names it, and only that tenant", () => {
    const h = guestHarness({ backend: BACKEND, tenants: TENANTS });
    const byCert = h.connect(cert("guest-c"));
    byCert.send(open("c", ""));
    expect(answers(byCert)[0]?.case).toBe("opened");
    const other = h.connect(cert("guest-c"));
    other.send(open("a", ""));
    expect(sessionError(other)?.code).toBe(ErrorCode.UNAUTHENTICATED);
    const wrongName = h.connect(cert("guest-x"));
    wrongName.send(open("c", ""));
    expect(sessionError(wrongName)).toEqual(sessionError(other));
  });
});

describe("tenant isolation through the guest port", () => {
  it("another tenant's context or buffer answers exactly as one that never existed", async () => {
    const h = guestHarness({ backend: BACKEND, tenants: TENANTS });
    const a = opened(h, "a", "token-of-a-0001");
    a.stream.send(
      frames(1, [
        { op: "contextCreate" },
        { op: "boAlloc", context: 1, sizeBytes: 4096 },
        { op: "dmaWrite", context: 1, bo: 1, offset: 0, data: Uint8Array.of(7, 7, 7) },
      ]),
    );
    await h.settled();
    expect(results(a.stream).map((r) => r.code)).toEqual([
      ErrorCode.OK,
      ErrorCode.OK,
      ErrorCode.OK,
    ]);
    const b = opened(h, "b", "token-of-b-0002");
    b.stream.send(frames(1, [{ op: "contextCreate" }])); // b's own context: handle 2
    await h.settled();
    const probes = (ctx: number): Call[] => [
      { op: "fence", context: ctx },
      { op: "dmaRead", context: ctx, bo: 1, offset: 0, length: 3 },
      { op: "dmaWrite", context: ctx, bo: 1, offset: 0, data: Uint8Array.of(1) },
      { op: "boFree", context: ctx, bo: 1 },
      { op: "boAlloc", context: ctx, sizeBytes: 4096 },
      { op: "contextDestroy", context: ctx },
      { op: "kernelLaunch", context: ctx, kernel: "fill", args: [{ kind: "buffer", bo: 1 }] },
      // a's buffer number in b's own context
      { op: "dmaRead", context: 2, bo: 1, offset: 0, length: 3 },
      { op: "boFree", context: 2, bo: 1 },
    ];
    b.stream.send(frames(2, probes(1)));
    await h.settled();
    const whileLive = results(b.stream).slice(1);
    // The same calls once a's context is gone: identical answers, message included.
    a.stream.send(frames(4, [{ op: "contextDestroy", context: 1 }]));
    await h.settled();
    b.stream.written.length = 0;
    b.stream.send(frames(2 + probes(1).length, probes(1)));
    await h.settled();
    expect(results(b.stream)).toEqual(whileLive);
    expect(whileLive.slice(0, 7).every((r) => r.code === ErrorCode.UNKNOWN_CONTEXT)).toBe(true);
    expect(whileLive.slice(7).every((r) => r.code === ErrorCode.UNKNOWN_BO)).toBe(true);
  });
});

describe("session limits", () => {
  it("limits sessions per tenant and in total, and the rate of new ones; not resumes", () => {
    let now = 0;
    const h = guestHarness({
      backend: BACKEND,
      tenants: TENANTS,
      sessionLimits: {
        maxSessionsPerTenant: 2,
        maxSessionsTotal: 3,
        opensPerSecond: 1,
        openBurst: 3,
      },
      nowMs: () => now,
    });
    const a1 = opened(h, "a", "token-of-a-0001");
    opened(h, "a", "token-of-a-0001");
    const third = h.connect();
    third.send(open("a", "token-of-a-0001"));
    expect(sessionError(third)).toEqual({
      code: ErrorCode.LIMIT_EXCEEDED,
      message: "tenant has 2 sessions open, limit 2",
    });
    opened(h, "b", "token-of-b-0002");
    const fourth = h.connect();
    fourth.send(open("b", "token-of-b-0002"));
    expect(sessionError(fourth)?.message).toBe("node has no room for another session (limit 3)");
    // A resume is never limited.
    const resumed = h.connect();
    resumed.send(open("a", "token-of-a-0001", a1.id));
    expect(answers(resumed)[0]?.case).toBe("opened");
    expect(h.backend.sessions.size).toBe(3);
    now += 10_000;
    // Closing one makes room; the rate still holds new ones back.
    a1.stream.emit("data", create(w.GuestMessageSchema, { kind: { case: "close", value: {} } }));
    resumed.send(create(w.GuestMessageSchema, { kind: { case: "close", value: {} } }));
    expect(h.backend.sessions.size).toBe(2);
  });

  it("answers an open above the rate only when the rate would have let it in", async () => {
    const h = guestHarness({
      backend: BACKEND,
      tenants: TENANTS,
      sessionLimits: {
        maxSessionsPerTenant: 100,
        maxSessionsTotal: 100,
        opensPerSecond: 20,
        openBurst: 1,
      },
    });
    opened(h, "a", "token-of-a-0001");
    const early = h.connect();
    const t0 = performance.now();
    early.send(open("a", "token-of-a-0001"));
    expect(early.written).toHaveLength(0); // held back
    await new Promise<void>((resolve) => {
      const poll = () => (early.ended ? resolve() : setTimeout(poll, 2));
      poll();
    });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(30); // 1/20 s, less timer slack
    expect(sessionError(early)).toEqual({
      code: ErrorCode.LIMIT_EXCEEDED,
      message: "session opens above 20 per second (burst 1)",
    });
  });
});

describe("frames in flight, order, half-close", () => {
  it("refuses a message above maxFramesInFlight after serving what came before it", async () => {
    const h = guestHarness({ backend: BACKEND, tenants: TENANTS, maxFramesInFlight: 4 });
    const a = opened(h, "a", "token-of-a-0001");
    a.stream.send(frames(1, [{ op: "contextCreate" }, { op: "fence", context: 1 }]));
    a.stream.send(
      frames(
        3,
        Array.from({ length: 5 }, () => ({ op: "fence", context: 1 }) as Call),
      ),
    );
    await h.settled();
    expect(results(a.stream).map((r) => r.code)).toEqual([ErrorCode.OK, ErrorCode.OK]);
    expect(sessionError(a.stream)).toEqual({
      code: ErrorCode.LIMIT_EXCEEDED,
      message: "5 frames unanswered, limit 4",
    });
  });

  it("serves everything sent before a half-close, then ends the stream", async () => {
    const h = guestHarness({ backend: BACKEND, tenants: TENANTS });
    const a = opened(h, "a", "token-of-a-0001");
    const data = new Uint8Array(64 << 10);
    a.stream.send(
      frames(1, [{ op: "contextCreate" }, { op: "boAlloc", context: 1, sizeBytes: 64 << 10 }]),
    );
    const many = Array.from(
      { length: 300 },
      () => ({ op: "dmaWrite", context: 1, bo: 1, offset: 0, data }) as Call,
    );
    a.stream.send(frames(3, many));
    a.stream.emit("end");
    await h.settled();
    expect(results(a.stream)).toHaveLength(302);
    expect(results(a.stream).every((r) => r.code === ErrorCode.OK)).toBe(true);
    expect(a.stream.ended).toBe(true);
  });
});

describe("fairness between tenants", () => {
  it("answers a tenant's one frame long before another tenant's backlog is served", async () => {
    const h = guestHarness({ backend: BACKEND, tenants: TENANTS });
    const heavy = opened(h, "a", "token-of-a-0001");
    const light = opened(h, "b", "token-of-b-0002");
    const data = new Uint8Array(256 << 10);
    heavy.stream.send(
      frames(1, [{ op: "contextCreate" }, { op: "boAlloc", context: 1, sizeBytes: 256 << 10 }]),
    );
    light.stream.send(frames(1, [{ op: "contextCreate" }]));
    const backlog = Array.from(
      { length: 1000 },
      () => ({ op: "dmaWrite", context: 1, bo: 1, offset: 0, data }) as Call,
    );
    // 40 messages of 25 frames: more queued than a stream may have before it is not read.
    for (let i = 0; i < 40; i++)
      heavy.stream.send(frames(3 + 25 * i, backlog.slice(25 * i, 25 * (i + 1))));
    light.stream.send(frames(2, [{ op: "fence", context: 2 }]));
    // The light tenant's frame is answered within a turn or two; the backlog is far from done.
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(results(light.stream)).toHaveLength(2);
    expect(results(heavy.stream).length).toBeLessThan(500);
    expect(heavy.stream.paused).toBe(true); // not read further meanwhile
    await h.settled();
    expect(results(heavy.stream)).toHaveLength(1002);
    expect(heavy.stream.paused).toBe(false);
  });

  it("holds a tenant past its budget of refused frames until the budget refills", async () => {
    let now = 0;
    const h = guestHarness({
      backend: BACKEND,
      tenants: TENANTS,
      refusals: { perSecond: 100, burst: 5 },
      nowMs: () => now,
    });
    const bad = opened(h, "a", "token-of-a-0001");
    const good = opened(h, "b", "token-of-b-0002");
    const refused = Array.from({ length: 20 }, () => ({ op: "fence", context: 99 }) as Call);
    bad.stream.send(frames(1, refused));
    good.stream.send(frames(1, [{ op: "contextCreate" }, { op: "fence", context: 99 }]));
    await new Promise((r) => setTimeout(r, 20));
    // The burst (and perhaps the frame that found it spent); then held.
    const held = results(bad.stream).length;
    expect(held).toBeGreaterThanOrEqual(5);
    expect(held).toBeLessThanOrEqual(6);
    expect(results(good.stream)).toHaveLength(2); // another tenant is not held
    // Each refill lets the next few through; the rest stay held until time goes on.
    await new Promise((r) => setTimeout(r, 100));
    expect(results(bad.stream)).toHaveLength(held); // time stood still: still held
    const seen = [held];
    while (seen.at(-1)! < 20 && seen.length < 10) {
      now += 1000;
      await new Promise((r) => setTimeout(r, 100)); // a parked tenant is looked at every 50 ms
      seen.push(results(bad.stream).length);
    }
    expect(seen.at(-1)).toBe(20);
    for (let i = 1; i < seen.length; i++) expect(seen[i]! - seen[i - 1]!).toBeLessThanOrEqual(6);
    await h.settled();
    expect(results(bad.stream).every((r) => r.code === ErrorCode.UNKNOWN_CONTEXT)).toBe(true);
  });
});

describe("idle sessions and operators' closes", () => {
  const closeEntries = (h: ReturnType<typeof guestHarness>) =>
    h.sequencer.log
      .read(1, 1000, 1 << 30)
      .flatMap((e) => (e.body.kind === "sessionClose" ? [e.body] : []));

  it("reaps a session idle for sessionIdleMs through the log, frees its quota, expires its resume", async () => {
    let now = 0;
    const h = guestHarness({
      backend: BACKEND,
      tenants: TENANTS,
      sessionLimits: {
        maxSessionsPerTenant: 2,
        maxSessionsTotal: 9,
        opensPerSecond: 99,
        openBurst: 9,
      },
      nowMs: () => now,
      sessionIdleMs: 1000,
    });
    const gone = opened(h, "a", "token-of-a-0001");
    gone.stream.send(
      frames(1, [{ op: "contextCreate" }, { op: "boAlloc", context: 1, sizeBytes: 65536 }]),
    );
    await h.settled();
    expect(h.backend.sessionVramBytes(gone.id)).toBe(65536);
    now = 100;
    gone.stream.emit("cancelled"); // the guest died without Close
    const live = opened(h, "a", "token-of-a-0001");
    const full = h.connect();
    full.send(open("a", "token-of-a-0001"));
    expect(sessionError(full)?.code).toBe(ErrorCode.LIMIT_EXCEEDED);

    now = 1099;
    expect(h.service.reapIdle(256).size).toBe(0);
    now = 1100;
    expect(h.service.reapIdle(256)).toEqual(new Map([["a", 1]]));
    expect([...h.backend.sessions.keys()]).toEqual([live.id]);
    expect(h.backend.device.vram.usedBytes).toBe(0);
    expect(h.backend.contexts.size).toBe(0);
    expect(closeEntries(h)).toEqual([{ kind: "sessionClose", sessionId: gone.id, reason: "idle" }]);
    now = 1_000_000; // the attached session is never reaped
    expect(h.service.reapIdle(256).size).toBe(0);

    const back = h.connect();
    back.send(open("a", "token-of-a-0001", gone.id));
    expect(sessionError(back)).toEqual({
      code: ErrorCode.SESSION_EXPIRED,
      message: expect.stringContaining("no stream was attached for guest.sessionIdleSeconds"),
    });
    const stranger = h.connect();
    stranger.send(open("b", "token-of-b-0002", gone.id));
    expect(sessionError(stranger)?.code).toBe(ErrorCode.UNKNOWN_SESSION);
    opened(h, "a", "token-of-a-0001"); // room again
  });

  it("an operator's close ends the attached stream with SESSION_EXPIRED, through the log", () => {
    const h = guestHarness({ backend: BACKEND, tenants: TENANTS, sessionIdleMs: 0 });
    const s = opened(h, "b", "token-of-b-0002");
    expect(h.service.endSession("no-such-session", "operator")).toBeUndefined();
    expect(h.service.endSession(s.id, "operator")).toMatchObject({ tenant: "b" });
    expect(s.stream.ended).toBe(true);
    expect(sessionError(s.stream)?.code).toBe(ErrorCode.SESSION_EXPIRED);
    expect(h.backend.sessions.size).toBe(0);
    expect(closeEntries(h)).toEqual([
      { kind: "sessionClose", sessionId: s.id, reason: "operator" },
    ]);
    // With sessionIdleMs 0 nothing is ever reaped.
    const idle = opened(h, "b", "token-of-b-0002");
    idle.stream.emit("cancelled");
    expect(h.service.reapIdle(256).size).toBe(0);
    expect(h.backend.sessions.has(idle.id)).toBe(true);
  });
});
