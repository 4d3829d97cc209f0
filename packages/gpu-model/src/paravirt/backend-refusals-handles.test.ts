// Proves a guest can name only its own handles and send its frames only in order: an unknown
// or another session's context or buffer is refused as unknown (UNKNOWN_CONTEXT, UNKNOWN_BO),
// and an out-of-order, repeated or evicted frame is rejected, each changing no GPU state
// (expectRefused in testing/refusal-harness.ts; rejected frames change nothing at all).
import { type Call, ErrorCode } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { computeDigest } from "../digest.js";
import {
  buf,
  call,
  expectRefused,
  launch,
  SMALL,
  setup,
  stores,
  u32,
} from "../testing/refusal-harness.js";
import { storeBatch } from "../testing/test-guest.js";

describe("handles the guest may not name", () => {
  it("unknown context: UNKNOWN_CONTEXT for every call that names one", () => {
    const { g, a } = setup();
    for (const context of [99, 0, -1, 2 ** 32, 1.5]) {
      expectRefused(g, call({ op: "fence", context }), ErrorCode.UNKNOWN_CONTEXT);
      expectRefused(g, call({ op: "contextDestroy", context }), ErrorCode.UNKNOWN_CONTEXT);
      expectRefused(
        g,
        call({ op: "boAlloc", context, sizeBytes: 4096 }),
        ErrorCode.UNKNOWN_CONTEXT,
      );
      expectRefused(g, call({ op: "boMap", context, bo: a }), ErrorCode.UNKNOWN_CONTEXT);
      expectRefused(
        g,
        launch(context, "fill", [buf(a), u32(1), u32(1)]),
        ErrorCode.UNKNOWN_CONTEXT,
      );
      expectRefused(
        g,
        stores(storeBatch(context, a, [{ offset: 0, bytes: [1] }])),
        ErrorCode.UNKNOWN_CONTEXT,
      );
    }
  });

  it("another session's context looks exactly like an unknown one (same tenant or not)", () => {
    const { g, neighbour, neighbourCtx, stranger, strangerCtx } = setup();
    const probes = (context: number): Call[] => [
      { op: "fence", context },
      { op: "contextDestroy", context },
      { op: "boAlloc", context, sizeBytes: 4096 },
      { op: "dmaRead", context, bo: 1, offset: 0, length: 4 },
      { op: "dmaWrite", context, bo: 1, offset: 0, data: Uint8Array.of(9) },
      { op: "boFree", context, bo: 1 },
    ];
    const whileLive = [neighbourCtx, strangerCtx].flatMap((c) =>
      probes(c).map((p) => expectRefused(g, call(p), ErrorCode.UNKNOWN_CONTEXT)),
    );
    // The same calls once those contexts are gone: identical replies, message included.
    neighbour.ok({ op: "contextDestroy", context: neighbourCtx });
    stranger.ok({ op: "contextDestroy", context: strangerCtx });
    const whenGone = [neighbourCtx, strangerCtx].flatMap((c) =>
      probes(c).map((p) => expectRefused(g, call(p), ErrorCode.UNKNOWN_CONTEXT)),
    );
    expect(whileLive).toEqual(whenGone);
  });

  it("unknown buffer: UNKNOWN_BO in every call that names one", () => {
    const { g, ctx, a } = setup();
    for (const bo of [99, 0, -1, 3]) {
      expectRefused(g, call({ op: "boFree", context: ctx, bo }), ErrorCode.UNKNOWN_BO);
      expectRefused(g, call({ op: "boMap", context: ctx, bo }), ErrorCode.UNKNOWN_BO);
      expectRefused(g, call({ op: "boUnmap", context: ctx, bo }), ErrorCode.UNKNOWN_BO);
      expectRefused(
        g,
        call({ op: "dmaWrite", context: ctx, bo, offset: 0, data: Uint8Array.of(1) }),
        ErrorCode.UNKNOWN_BO,
      );
      expectRefused(
        g,
        call({ op: "dmaRead", context: ctx, bo, offset: 0, length: 1 }),
        ErrorCode.UNKNOWN_BO,
      );
      for (const [srcBo, dstBo] of [
        [a, bo],
        [bo, a],
      ]) {
        expectRefused(
          g,
          call({
            op: "boCopy",
            context: ctx,
            srcBo: srcBo!,
            srcOffset: 0,
            dstBo: dstBo!,
            dstOffset: 0,
            length: 4,
          }),
          ErrorCode.UNKNOWN_BO,
        );
      }
      expectRefused(g, launch(ctx, "copy", [buf(a), buf(bo), u32(1)]), ErrorCode.UNKNOWN_BO);
      expectRefused(
        g,
        stores(storeBatch(ctx, bo, [{ offset: 0, bytes: [1] }])),
        ErrorCode.UNKNOWN_BO,
      );
    }
  });

  it("a buffer of another context is unknown in this one, even with the same session", () => {
    const { g, ctx, b } = setup();
    const second = g.createContext();
    const only = g.alloc(second, SMALL); // handle 1 in `second`; `b` (handle 2) lives in `ctx` only
    expect(only).toBe(1);
    const probe = call({ op: "dmaRead", context: second, bo: b, offset: 0, length: 4 });
    const live = expectRefused(g, probe, ErrorCode.UNKNOWN_BO);
    g.ok({ op: "boFree", context: ctx, bo: b });
    expect(expectRefused(g, probe, ErrorCode.UNKNOWN_BO)).toEqual(live);
    expectRefused(g, launch(second, "fill", [buf(b), u32(1), u32(1)]), ErrorCode.UNKNOWN_BO);
  });
});

describe("frames", () => {
  it("out of order (gap, zero, negative, fractional, NaN): FRAME_OUT_OF_ORDER, nothing changes", () => {
    const { backend, g, ctx, a } = setup();
    const increment = launch(ctx, "increment_u32", [buf(a), u32(4), u32(1)]);
    const next = g.session.lastFrame + 1;
    const before = computeDigest(backend);
    for (const number of [
      next + 1,
      next + 1000,
      0,
      -1,
      next - 0.5,
      next + 0.5,
      Number.NaN,
      Infinity,
    ]) {
      const outcome = g.sendAs(number, increment);
      expect(outcome.kind).toBe("rejected");
      expect(outcome.result.code).toBe(
        number <= next - 1 ? ErrorCode.FRAME_REPEATED : ErrorCode.FRAME_OUT_OF_ORDER,
      );
    }
    for (const number of [next + 1, next + 1000, next + 0.5, Number.NaN, Infinity]) {
      expect(g.sendAs(number, increment).result.code).toBe(ErrorCode.FRAME_OUT_OF_ORDER);
    }
    expect(computeDigest(backend)).toEqual(before);
    expect(g.session.lastFrame).toBe(next - 1);
    expect(g.sendAs(next, increment).kind).toBe("applied");
  });

  it("a repeated frame with a cached reply gets that same reply object and runs nothing", () => {
    const { backend, g, ctx, a } = setup();
    const first = g.read(ctx, a, 0, 4);
    const frame = g.session.lastFrame + 1;
    const body = launch(ctx, "increment_u32", [buf(a), u32(1), u32(5)]);
    const applied = g.sendAs(frame, body);
    expect(applied.kind).toBe("applied");
    const read = g.session.lastFrame + 1;
    const readBody = call({ op: "dmaRead", context: ctx, bo: a, offset: 0, length: 4 });
    const readReply = g.sendAs(read, readBody);
    const before = computeDigest(backend);
    for (let i = 0; i < 3; i++) {
      const again = g.sendAs(frame, body);
      expect(again.kind).toBe("duplicate");
      expect(again.result).toBe(applied.result);
      const readAgain = g.sendAs(read, readBody);
      expect(readAgain.kind).toBe("duplicate");
      expect(readAgain.result).toBe(readReply.result);
    }
    expect(computeDigest(backend)).toEqual(before);
    // Incremented by 5 once, not four times.
    const word = (bytes: Uint8Array) =>
      new DataView(bytes.buffer, bytes.byteOffset).getUint32(0, true);
    expect(word(backend.contexts.get(ctx)!.bos.get(a)!.bo.bytes)).toBe((word(first) + 5) >>> 0);
  });

  it("a repeated frame whose reply was evicted (by count or bytes): FRAME_REPEATED, nothing changes", () => {
    for (const session of [
      { replyCacheFrames: 2 },
      { replyCacheFrames: 100, replyCacheBytes: 8 },
    ]) {
      const { backend, g, ctx, a } = setup({ session });
      const frame = g.session.lastFrame + 1;
      const body = launch(ctx, "increment_u32", [buf(a), u32(1), u32(5)]);
      expect(g.sendAs(frame, body).kind).toBe("applied");
      g.read(ctx, a, 0, 16); // 16 reply bytes: above the byte limit
      g.ok({ op: "fence", context: ctx });
      g.ok({ op: "fence", context: ctx });
      expect(g.session.replies.has(frame)).toBe(false);
      const before = computeDigest(backend);
      const again = g.sendAs(frame, body);
      expect(again.kind).toBe("rejected");
      expect(again.result.code).toBe(ErrorCode.FRAME_REPEATED);
      expect(computeDigest(backend)).toEqual(before);
    }
  });

  it("unknown tenant at openSession: UNAUTHENTICATED, no session made", () => {
    const { backend } = setup();
    const before = computeDigest(backend);
    for (const tenant of ["nobody", "", "T1", "__proto__"]) {
      const result = backend.openSession(`s-${tenant}`, tenant);
      expect("code" in result && result.code).toBe(ErrorCode.UNAUTHENTICATED);
      expect(backend.sessions.has(`s-${tenant}`)).toBe(false);
    }
    expect(computeDigest(backend)).toEqual(before);
  });
});
