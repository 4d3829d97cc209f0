// Proves the client session's failover rules as a pure machine, time and jitter as inputs: an
// open tries each endpoint once and stops at a fatal code; a lost session reconnects to the
// redirect, else the next endpoint, with doubling backoff until failoverTimeoutMs; a node of an
// older epoch is dropped, one that lost acknowledged frames fails the session; UNKNOWN_SESSION
// fails a resume only once no node can serve it; Acks of an older epoch are ignored; and
// (fast-check) whatever the nodes answer, it never dials outside its endpoints, never attaches
// an older epoch, and fails by the deadline.
import { ErrorCode } from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  FATAL,
  type NodeRefusal,
  type OpenedInfo,
  SessionMachine,
  type SessionStep,
} from "./session-machine.js";

const ENDPOINTS = ["a:1", "b:1"];

const machine = (o: { failoverTimeoutMs?: number; retryMaxMs?: number } = {}) =>
  new SessionMachine({
    endpoints: ENDPOINTS,
    failoverTimeoutMs: o.failoverTimeoutMs ?? 1000,
    retryMaxMs: o.retryMaxMs ?? 100,
  });

const opened = (epoch: number, lastFrame = 0, nodeId = "a"): OpenedInfo => ({
  sessionId: "s1",
  epoch,
  lastFrame,
  nodeId,
});
const refusal = (code: ErrorCode, redirect = "", answered = true): NodeRefusal => ({
  code,
  message: ErrorCode[code] ?? "",
  redirect,
  answered,
});
const broken: NodeRefusal = refusal(ErrorCode.NOT_PRIMARY, "", false);
const ctx = (settledThrough = 0, nowMs = 0, random = 0.5) => ({
  settledThrough,
  nowMs,
  random: () => random,
});

/** An open session on a:1 at `epoch`. */
function attached(epoch = 2, o: Parameters<typeof machine>[0] = {}): SessionMachine {
  const m = machine(o);
  m.open();
  m.dialed("a:1", opened(epoch), ctx());
  return m;
}

const dials = (steps: readonly SessionStep[]) =>
  steps.flatMap((s) => (s.kind === "dial" ? [s.endpoint] : []));

describe("SessionMachine: opening", () => {
  it("dials the first endpoint and attaches the first Opened", () => {
    const m = machine();
    expect(m.open()).toEqual({ kind: "dial", endpoint: "a:1", resumeSessionId: "" });
    expect(m.dialed("a:1", opened(3, 0, "na"), ctx())).toEqual([
      { kind: "attach", resumed: false },
    ]);
    expect(m).toMatchObject({ phase: "attached", sessionId: "s1", nodeId: "na", epoch: 3 });
  });

  it("tries the next endpoint after a refusal, and fails with the last after all", () => {
    const m = machine();
    m.open();
    expect(m.dialed("a:1", broken, ctx())).toEqual([
      { kind: "dial", endpoint: "b:1", resumeSessionId: "" },
    ]);
    const last = refusal(ErrorCode.NOT_PRIMARY, "a:1");
    expect(m.dialed("b:1", last, ctx())).toEqual([{ kind: "fail", error: last }]);
    expect(m.phase).toBe("failed");
  });

  it("stops at a fatal code: another node cannot help", () => {
    for (const code of FATAL) {
      const m = machine();
      m.open();
      expect(m.dialed("a:1", refusal(code), ctx())).toMatchObject([{ kind: "fail" }]);
    }
  });

  it("needs an endpoint", () => {
    expect(
      () => new SessionMachine({ endpoints: [], failoverTimeoutMs: 1, retryMaxMs: 1 }),
    ).toThrow();
  });
});

describe("SessionMachine: reconnecting", () => {
  it("goes to the node named by a redirect first, else the next endpoint", () => {
    const m = attached();
    expect(dials(m.lost(refusal(ErrorCode.NOT_PRIMARY, "a:1"), false, 0))).toEqual(["a:1"]);
    const n = attached();
    expect(dials(n.lost(broken, false, 0))).toEqual(["b:1"]);
    expect(n.phase).toBe("reconnecting");
  });

  it("resumes the session by id and re-sends: attach as resumed, one resume counted", () => {
    const m = attached(2);
    const [dial] = m.lost(broken, false, 0);
    expect(dial).toEqual({ kind: "dial", endpoint: "b:1", resumeSessionId: "s1" });
    expect(m.dialed("b:1", opened(3, 5, "nb"), ctx(5))).toEqual([
      { kind: "attach", resumed: true },
    ]);
    expect(m).toMatchObject({ phase: "attached", epoch: 3, nodeId: "nb", resumes: 1 });
    // The next failover starts from the endpoint after b:1.
    expect(dials(m.lost(broken, false, 0))).toEqual(["a:1"]);
  });

  it("backs off from 10 ms doubling to retryMaxMs, with jitter between half and all of it", () => {
    const m = attached(2, { retryMaxMs: 100, failoverTimeoutMs: 10_000 });
    m.lost(broken, false, 0);
    const waits: number[] = [];
    for (let i = 0; i < 6; i++) {
      const [step] = m.dialed(i % 2 === 0 ? "b:1" : "a:1", broken, ctx(0, i, 1));
      if (step?.kind !== "retry") throw new Error(`no retry: ${JSON.stringify(step)}`);
      waits.push(step.afterMs);
      m.retryDue(i);
    }
    expect(waits).toEqual([20, 40, 80, 100, 100, 100].map((ms) => ms * (0.5 + 1 / 2)));
    const low = attached(2);
    low.lost(broken, false, 0);
    expect(low.dialed("b:1", broken, ctx(0, 0, 0))).toEqual([{ kind: "retry", afterMs: 10 }]);
  });

  it("ignores a redirect back to the node that just failed", () => {
    const m = attached();
    m.lost(broken, false, 0);
    m.dialed("b:1", broken, ctx());
    expect(dials(m.retryDue(1))).toEqual(["a:1"]);
    m.dialed("a:1", refusal(ErrorCode.NOT_PRIMARY, "b:1"), ctx());
    expect(dials(m.retryDue(2))).toEqual(["b:1"]);
  });

  it("fails with the last error once failoverTimeoutMs has passed", () => {
    const m = attached(2, { failoverTimeoutMs: 500 });
    m.lost(broken, false, 100);
    const last = refusal(ErrorCode.NOT_PRIMARY, "", false);
    m.dialed("b:1", last, ctx(0, 200));
    expect(m.retryDue(599)).toMatchObject([{ kind: "dial" }]);
    m.dialed("a:1", last, ctx(0, 599));
    expect(m.retryDue(600)).toEqual([{ kind: "fail", error: last }]);
    expect(m.retryDue(700)).toEqual([]);
  });

  it("does not believe a node of an older epoch: drops it and keeps trying", () => {
    const m = attached(4);
    m.lost(broken, false, 0);
    const steps = m.dialed("b:1", opened(3), ctx());
    expect(steps.map((s) => s.kind)).toEqual(["drop", "retry"]);
    expect(m).toMatchObject({ phase: "reconnecting", epoch: 4, resumes: 0 });
  });

  it("fails the session when the node lacks frames whose replies were delivered", () => {
    const m = attached(2);
    m.lost(broken, false, 0);
    const steps = m.dialed("b:1", opened(3, 7, "nb"), ctx(10));
    expect(steps[0]).toEqual({ kind: "drop" });
    expect(steps[1]).toMatchObject({
      kind: "fail",
      error: { code: ErrorCode.FRAME_OUT_OF_ORDER, message: expect.stringContaining("3 lost") },
    });
  });

  it("fails at once on a fatal code, or when closing", () => {
    const m = attached();
    expect(m.lost(refusal(ErrorCode.UNAUTHENTICATED), false, 0)).toMatchObject([{ kind: "fail" }]);
    const n = attached();
    expect(n.lost(broken, true, 0)).toEqual([{ kind: "fail", error: broken }]);
    const r = attached();
    r.lost(broken, false, 0);
    const fatal = refusal(ErrorCode.WRONG_CLUSTER);
    expect(r.dialed("b:1", fatal, ctx())).toEqual([{ kind: "fail", error: fatal }]);
  });

  it("fails on UNKNOWN_SESSION only once every node is unknown or a standby", () => {
    const m = attached();
    m.lost(broken, false, 0);
    const unknown = refusal(ErrorCode.UNKNOWN_SESSION);
    expect(m.dialed("b:1", unknown, ctx())).toMatchObject([{ kind: "retry" }]);
    m.retryDue(1);
    const standby = refusal(ErrorCode.NOT_PRIMARY, "");
    expect(m.dialed("a:1", standby, ctx())).toEqual([{ kind: "fail", error: unknown }]);
  });

  it("prefers SESSION_EXPIRED as the reason: the answer that says the most", () => {
    const m = attached();
    m.lost(broken, false, 0);
    const expired = refusal(ErrorCode.SESSION_EXPIRED);
    m.dialed("b:1", expired, ctx());
    m.retryDue(1);
    expect(m.dialed("a:1", refusal(ErrorCode.UNKNOWN_SESSION), ctx())).toEqual([
      { kind: "fail", error: expired },
    ]);
  });

  it("keeps trying after UNKNOWN_SESSION while the other node only failed to answer", () => {
    const m = attached();
    m.lost(broken, false, 0);
    m.dialed("b:1", refusal(ErrorCode.UNKNOWN_SESSION), ctx());
    m.retryDue(1);
    expect(m.dialed("a:1", broken, ctx())).toMatchObject([{ kind: "retry" }]);
  });
});

describe("SessionMachine: replies and the end", () => {
  it("ignores Acks of an epoch older than one seen, adopts newer ones", () => {
    const m = attached(3);
    expect(m.acks(2)).toBe(false);
    expect(m.acks(3)).toBe(true);
    expect(m.acks(5)).toBe(true);
    expect(m.epoch).toBe(5);
    expect(m.acks(4)).toBe(false);
  });

  it("keeps the first failure; a failed session drops late streams and ignores the rest", () => {
    const m = attached();
    const first = refusal(ErrorCode.NOT_PRIMARY);
    m.fail(first);
    expect(m.fail(refusal(ErrorCode.MALFORMED)).error).toBe(first);
    expect(m.dialed("b:1", opened(9), ctx())).toEqual([{ kind: "drop" }]);
    expect(m.dialed("b:1", broken, ctx())).toEqual([]);
    expect(m.lost(broken, false, 0)).toEqual([]);
    expect(m.retryDue(0)).toEqual([]);
  });
});

describe("SessionMachine: any answers (property)", () => {
  const answer = fc.oneof(
    fc.record({
      kind: fc.constant("opened" as const),
      epoch: fc.integer({ min: 0, max: 6 }),
      lastFrame: fc.integer({ min: 0, max: 12 }),
    }),
    fc.record({
      kind: fc.constant("refused" as const),
      code: fc.constantFrom(
        ErrorCode.NOT_PRIMARY,
        ErrorCode.UNKNOWN_SESSION,
        ErrorCode.SESSION_EXPIRED,
        ErrorCode.UNAUTHENTICATED,
      ),
      redirect: fc.constantFrom("", "a:1", "b:1"),
      answered: fc.boolean(),
    }),
    fc.constant({ kind: "lost" as const }),
  );

  it("dials only its endpoints, never attaches an older epoch, fails by the deadline", () => {
    fc.assert(
      fc.property(
        fc.array(answer, { maxLength: 60 }),
        fc.double({ min: 0, max: 0.999 }),
        (answers, rnd) => {
          const m = machine({ failoverTimeoutMs: 400, retryMaxMs: 50 });
          let now = 0;
          let lostAt: number | undefined;
          let pending: SessionStep | undefined = m.open();
          let settled = 0;
          for (const a of answers) {
            if (m.phase === "failed") break;
            if (a.kind === "lost") {
              if (m.phase !== "attached") continue;
              lostAt = now;
              pending = m.lost(broken, false, now).find((s) => s.kind === "dial");
              continue;
            }
            if (pending?.kind !== "dial") break;
            expect(ENDPOINTS).toContain(pending.endpoint);
            const before = m.epoch;
            const outcome =
              a.kind === "opened"
                ? opened(a.epoch, a.lastFrame)
                : refusal(a.code, a.redirect, a.answered || a.redirect !== "");
            const steps = m.dialed(pending.endpoint, outcome, ctx(settled, now, rnd));
            if (steps.some((s) => s.kind === "attach")) {
              expect(m.epoch).toBeGreaterThanOrEqual(before);
              lostAt = undefined;
              settled = Math.min(settled + 1, a.kind === "opened" ? a.lastFrame : settled);
            }
            const retry = steps.find((s) => s.kind === "retry");
            pending = undefined;
            if (retry?.kind === "retry") {
              expect(retry.afterMs).toBeLessThanOrEqual(50);
              now += retry.afterMs;
              pending = m.retryDue(now)[0];
            } else {
              pending = steps.find((s) => s.kind === "dial");
            }
            if (lostAt !== undefined && now >= lostAt + 400) {
              expect(m.phase).toBe("failed");
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
