// Proves the ring of cached replies behaves as a Map kept in insertion order would, for random
// runs of pushes (frames increasing, contiguous or with gaps up to 2^40), in-place replacements,
// evictions of the oldest and lookups of cached and absent frames, across ring growth and
// wrap-around; and that a frame below the newest is refused rather than misplaced.
import { type CallResult, ErrorCode } from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ReplyCache } from "./reply-cache.js";

const reply = (n: number): CallResult => ({
  code: ErrorCode.OK,
  message: `r${n}`,
  output: { kind: "fence", value: n },
});

type Step =
  | { readonly kind: "push"; readonly gap: number }
  | { readonly kind: "replace"; readonly pick: number }
  | { readonly kind: "shift"; readonly n: number }
  | { readonly kind: "get"; readonly probe: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("push" as const),
      gap: fc.oneof(
        { weight: 8, arbitrary: fc.constant(1) },
        fc.integer({ min: 1, max: 5 }),
        fc.constant(2 ** 40),
      ),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("replace" as const), pick: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("shift" as const),
      n: fc.integer({ min: 1, max: 20 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("get" as const),
      probe: fc.integer({ min: -3, max: 3 }),
    }),
  },
);

describe("ReplyCache", () => {
  it("matches a Map in insertion order for any run of steps", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.array(stepArb, { maxLength: 400 }),
        (start, steps) => {
          const ring = new ReplyCache();
          const model = new Map<number, CallResult>();
          let next = start;
          let n = 0;
          for (const step of steps) {
            switch (step.kind) {
              case "push": {
                next += step.gap;
                const r = reply(n++);
                ring.push(next, r);
                model.set(next, r);
                break;
              }
              case "replace": {
                if (model.size === 0) break;
                const frame = [...model.keys()][step.pick % model.size]!;
                const r = reply(n++);
                expect(ring.replace(frame, r)).toBe(model.get(frame));
                model.set(frame, r);
                break;
              }
              case "shift":
                for (let i = 0; i < step.n && model.size > 0; i++) {
                  const oldest = model.keys().next().value!;
                  expect(ring.oldestFrame).toBe(oldest);
                  expect(ring.shift()).toBe(model.get(oldest));
                  model.delete(oldest);
                }
                break;
              case "get": {
                // A cached frame, its neighbours (often absent), and frames beyond either end.
                const keys = [...model.keys()];
                const around = keys.length === 0 ? next : keys[Math.floor(keys.length / 2)]!;
                for (const f of [around + step.probe, next + 1, (keys[0] ?? next) - 1]) {
                  expect(ring.get(f)).toBe(model.get(f));
                  expect(ring.has(f)).toBe(model.has(f));
                }
                break;
              }
            }
            expect(ring.size).toBe(model.size);
          }
          expect([...ring.keys()]).toEqual([...model.keys()]);
          expect([...ring]).toEqual([...model]);
          expect(ring.newestFrame).toBe(model.size === 0 ? undefined : [...model.keys()].at(-1));
          for (const [frame, r] of model) expect(ring.get(frame)).toBe(r);
        },
      ),
    );
  });

  it("keeps a full cache of 4096 contiguous frames through many wrap-arounds", () => {
    const ring = new ReplyCache();
    for (let f = 1; f <= 50_000; f++) {
      ring.push(f, reply(f));
      if (ring.size > 4096) ring.shift();
    }
    expect(ring.size).toBe(4096);
    expect(ring.oldestFrame).toBe(50_000 - 4095);
    expect(ring.get(50_000 - 4095)?.message).toBe(`r${50_000 - 4095}`);
    expect(ring.get(50_000 - 4096)).toBeUndefined();
    expect(ring.get(50_001)).toBeUndefined();
  });

  it("refuses a frame that is not above every cached one", () => {
    const ring = new ReplyCache();
    ring.push(10, reply(1));
    expect(() => ring.push(10, reply(2))).toThrow(/frame 10 after 10/);
    expect(() => ring.push(3, reply(3))).toThrow(/frame 3 after 10/);
    expect(() => ring.replace(11, reply(4))).toThrow(/not cached/);
    expect([...ring.keys()]).toEqual([10]);
  });
});
