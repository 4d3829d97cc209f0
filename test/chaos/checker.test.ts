// Proves the chaos checker can fail: histories recorded against a local GPU model stand in for
// a run, and each kind of damage a daemon could do — an increment applied twice, an
// acknowledged frame missing, two nodes acknowledging one epoch, an epoch going back, an old
// primary acknowledging after a new one — turns its check red, while the undamaged history
// passes. Split-brain losses pass only when the nodes reported them, and only in peer mode.
import { type CallResult, ErrorCode, type FrameBody } from "@vgpu-ha/common";
import { Backend, computeDigest } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { type CheckInput, check } from "./checker.js";
import { ADMIN_TOKEN, GUEST } from "./cluster.js";
import type { Ack, FrameRecord, SessionHistory } from "./history.js";
import type { StatusSample } from "./monitor.js";
import type { StepDown } from "./node-logs.js";
import { backendOptionsOf, replayReference } from "./reference.js";

const options = backendOptionsOf({
  ops: { token: ADMIN_TOKEN },
  tenants: [{ name: GUEST.tenant, token: GUEST.token }],
});

const increment: FrameBody = {
  kind: "call",
  call: {
    op: "kernelLaunch",
    context: 1,
    kernel: "increment_u32",
    args: [
      { kind: "buffer", bo: 1 },
      { kind: "u32", value: 1 },
      { kind: "u32", value: 1 },
    ],
  },
};
const bodies: [FrameBody, string][] = [
  [{ kind: "call", call: { op: "contextCreate" } }, "setup"],
  [{ kind: "call", call: { op: "boAlloc", context: 1, sizeBytes: 4096 } }, "setup"],
  [increment, "increment"],
  [
    {
      kind: "call",
      call: { op: "dmaWrite", context: 1, bo: 1, offset: 64, data: Uint8Array.of(1, 2) },
    },
    "dmaWrite",
  ],
  [increment, "increment"],
  [increment, "increment"],
  [{ kind: "call", call: { op: "dmaRead", context: 1, bo: 1, offset: 0, length: 4 } }, "read"],
];

/** One session run against a local "node"; every frame acknowledged at epoch 1 by node-a. */
function recorded(): { node: Backend; history: SessionHistory; acks: Ack[] } {
  const node = new Backend(options);
  const record = node.openSession("s-1", GUEST.tenant);
  if (!("lastFrame" in record)) throw new Error(record.message);
  const acks: Ack[] = [];
  const frames: FrameRecord[] = bodies.map(([body, kind], i) => {
    const result: CallResult = node.applyFrame(record, { number: i + 1, body }).result;
    acks.push({ atMs: i * 10, slot: 0, nodeId: "node-a", epoch: 1 });
    return {
      number: i + 1,
      body,
      kind,
      invokedMs: i * 10,
      outcome: "ok",
      settledMs: i * 10,
      result,
      nodeId: "node-a",
      epoch: 1,
    };
  });
  const history: SessionHistory = {
    slot: 0,
    generation: 0,
    id: "s-1",
    seed: 1,
    openedMs: 0,
    openedOn: { nodeId: "node-a", epoch: 1 },
    frames,
    counter: { context: 1, bo: 1 },
    counterRead: 3,
  };
  return { node, history, acks };
}

function inputFor(
  node: Backend,
  history: SessionHistory,
  acks: Ack[],
  over: Partial<CheckInput> = {},
  lastFrame: number | undefined = node.sessions.get("s-1")?.lastFrame,
): CheckInput {
  const lastFrames = new Map([["s-1", lastFrame]]);
  const reference = replayReference(options, [{ history, tenant: GUEST.tenant, lastFrame }]);
  const d = computeDigest(node);
  const samples: StatusSample[] = [
    { atMs: 0, node: "a", process: "running", pid: 1, reachable: true, role: "primary", epoch: 1 },
    { atMs: 0, node: "b", process: "running", pid: 2, reachable: true, role: "standby", epoch: 1 },
  ];
  return {
    mode: "sync",
    lease: "peer",
    sessions: [history],
    lastFrames,
    acks,
    samples,
    faults: [
      {
        plan: { index: 0, kind: "kill", quietMs: 0, holdMs: 0, restartDelayMs: 0 },
        description: "kill",
        startMs: 5,
        failoverMs: 5,
        recoveredMs: 50,
        errors: [],
      },
    ],
    stepDowns: [],
    reference,
    final: {
      primary: { nodeId: "node-a", seq: 7, ...d },
      standby: { nodeId: "node-b", seq: 7, state: d.state },
      convergedMs: 100,
      verify: { equal: true, seq: 8 },
      stateAfterProbes: d.state,
    },
    unexpectedExits: [],
    harnessErrors: [],
    nemesisStuck: undefined,
    allSettled: true,
    ...over,
  };
}

const failed = (input: CheckInput) =>
  check(input)
    .verdicts.filter((v) => !v.ok)
    .map((v) => v.name);

describe("the chaos checker", () => {
  it("passes an undamaged history", () => {
    const { node, history, acks } = recorded();
    expect(failed(inputFor(node, history, acks))).toEqual([]);
  });

  it("catches an increment applied twice", () => {
    const { node, history, acks } = recorded();
    // The node runs one acknowledged increment a second time.
    node.execute(node.sessions.get("s-1")!, (increment as { kind: "call"; call: never }).call);
    history.counterRead = 4;
    const names = failed(inputFor(node, history, acks));
    expect(names).toContain("final state equals the reference replay");
    expect(names).toContain("no duplicated effects (increment counters = acknowledged increments)");
    expect(check(inputFor(node, history, acks)).counts.duplicated).toBe(1);
  });

  it("catches an acknowledged frame the final node lacks", () => {
    const { node, history, acks } = recorded();
    const input = inputFor(node, history, acks, {}, 6);
    expect(failed(input)).toContain(
      "no acknowledged frame lost (beyond reported split-brain or async losses)",
    );
    expect(check(input).counts.lost).toBe(1);
  });

  it("excuses split-brain losses only as far as a node reported them, and never with etcd", () => {
    const { node, history, acks } = recorded();
    history.failure = { atMs: 60, code: ErrorCode.FRAME_OUT_OF_ORDER, message: "1 lost" };
    const report = (acknowledgedFrames: number): StepDown => ({
      node: "a",
      pid: 1,
      atMs: 55,
      epoch: 2,
      theirEpoch: 2,
      discarded: { entries: 3, frames: 3, acknowledgedFrames, sessions: 0 },
      message: "stepping down to standby",
    });
    const lostName = "no acknowledged frame lost (beyond reported split-brain or async losses)";
    expect(failed(inputFor(node, history, acks, { stepDowns: [] }, 5))).toContain(lostName);
    expect(failed(inputFor(node, history, acks, { stepDowns: [report(1)] }, 5))).toContain(
      lostName,
    );
    expect(failed(inputFor(node, history, acks, { stepDowns: [report(2)] }, 5))).not.toContain(
      lostName,
    );
    expect(
      failed(inputFor(node, history, acks, { stepDowns: [report(2)], lease: "etcd" }, 5)),
    ).toContain(lostName);
  });

  it("catches two nodes acknowledging one epoch, and epochs going back", () => {
    const { node, history, acks } = recorded();
    const twoNodes = acks.map((a, i) => (i === 3 ? { ...a, nodeId: "node-b" } : a));
    expect(failed(inputFor(node, history, twoNodes))).toEqual([
      "one primary per epoch (acknowledgements and status polls)",
    ]);
    history.frames[4]!.epoch = 2;
    expect(failed(inputFor(node, history, acks))).toContain(
      "epochs only grow (per session, per node)",
    );
  });

  it("catches an old primary acknowledging after a new one", () => {
    const { node, history, acks } = recorded();
    const late = [
      ...acks,
      { atMs: 100, slot: 0, nodeId: "node-b", epoch: 2 },
      { atMs: 300, slot: 1, nodeId: "node-a", epoch: 1 },
    ];
    expect(failed(inputFor(node, history, late))).toEqual([
      "no two primaries acknowledging at once (outside reported split brains)",
    ]);
  });

  it("fails a run whose replicas never converged or whose fault never led to a failover", () => {
    const { node, history, acks } = recorded();
    const input = inputFor(node, history, acks);
    expect(failed({ ...input, final: { ...input.final, convergedMs: undefined } })).toEqual([
      "replicas converge after the last fault",
    ]);
    expect(failed({ ...input, faults: [{ ...input.faults[0]!, failoverMs: undefined }] })).toEqual([
      "every primary kill and pause ends in a failover",
    ]);
    expect(failed({ ...input, faults: [] })).toEqual(["the pair recovers after every fault"]);
  });
});
