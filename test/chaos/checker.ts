// The checker: verdicts from what the guests recorded, what the harness saw polling the nodes,
// the nodes' final state read through their ops ports, and the reference replay — never from
// the daemons' own opinion of whether all is well (their verify is reported beside, as one more
// check). Each check says what it compared, so a failure names what went wrong.
import { ErrorCode } from "@vgpu-ha/common";
import type { Mode } from "../support/modes.js";
import type { Ack, SessionHistory } from "./history.js";
import type { StatusSample } from "./monitor.js";
import type { FaultRecord } from "./nemesis.js";
import type { StepDown } from "./node-logs.js";
import type { ReferenceResult } from "./reference.js";

export interface Verdict {
  readonly name: string;
  readonly ok: boolean;
  readonly detail: string;
}

/** Acknowledgements of a lower epoch this long after the first of a higher one overlap. */
export const OVERLAP_TOLERANCE_MS = 100;
/** Both nodes must hold equal digests within this after the last fault is undone. */
export const CONVERGE_BOUND_MS = 30_000;

export interface FinalState {
  /** The primary's digest and the standby's, read at one seq. */
  readonly primary:
    | { nodeId: string; seq: number; state: string; gpu: string; sessions: string }
    | undefined;
  readonly standby: { nodeId: string; seq: number; state: string } | undefined;
  /** From the final heal to equal digests (undefined: never within the bound). */
  readonly convergedMs: number | undefined;
  readonly verify: { equal: boolean; seq: number } | { error: string };
  /** The primary's digest again after the session probes (must not have moved). */
  readonly stateAfterProbes: string | undefined;
}

export interface CheckInput {
  readonly mode: Mode;
  readonly lease: "peer" | "etcd";
  readonly sessions: readonly SessionHistory[];
  /** Per session id: the final node's last frame, or undefined when it does not hold it. */
  readonly lastFrames: ReadonlyMap<string, number | undefined>;
  readonly acks: readonly Ack[];
  readonly samples: readonly StatusSample[];
  readonly faults: readonly FaultRecord[];
  readonly stepDowns: readonly StepDown[];
  readonly reference: ReferenceResult;
  readonly final: FinalState;
  readonly unexpectedExits: readonly string[];
  readonly harnessErrors: readonly string[];
  readonly nemesisStuck: string | undefined;
  readonly allSettled: boolean;
}

export interface Counts {
  readonly framesSent: number;
  readonly framesAcknowledged: number;
  /** Acknowledged frames missing from the final state. */
  readonly lost: number;
  /** ...of which excused: reported split-brain discards (peer lease) or async losses reported to the guest. */
  readonly lostExcused: number;
  /** Increments applied beyond those acknowledged (a frame applied twice). */
  readonly duplicated: number;
  readonly incrementsAcknowledged: number;
  readonly sessionsFailed: number;
  readonly splitBrainReported: {
    acknowledgedFrames: number;
    frames: number;
    sessions: number;
    stepDowns: number;
  };
}

function lostOf(s: SessionHistory, lastFrame: number | undefined): number {
  return s.frames.filter(
    (f) => f.outcome === "ok" && (lastFrame === undefined || f.number > lastFrame),
  ).length;
}

export function check(input: CheckInput): { verdicts: Verdict[]; counts: Counts } {
  const verdicts: Verdict[] = [];
  const add = (name: string, ok: boolean, detail: string) => verdicts.push({ name, ok, detail });
  const { final, reference } = input;

  // --- every acknowledged frame in the final state exactly once ---
  const p = final.primary;
  add(
    "final state equals the reference replay",
    p !== undefined && p.state === reference.digest.state,
    p === undefined
      ? "no primary digest to compare"
      : p.state === reference.digest.state
        ? `digest ${p.state.slice(0, 16)}… at seq ${p.seq} = replay of ${reference.framesReplayed} frames`
        : `node ${p.nodeId} at seq ${p.seq}: gpu ${p.gpu === reference.digest.gpu ? "equal" : "DIFFERS"}, sessions ${p.sessions === reference.digest.sessions ? "equal" : "DIFFER"} (node ${p.state.slice(0, 16)}…, reference ${reference.digest.state.slice(0, 16)}…)`,
  );
  add(
    "every acknowledged result equals the reference's",
    reference.mismatches.length === 0 && reference.problems.length === 0,
    reference.mismatches.length + reference.problems.length === 0
      ? "all results equal"
      : [...reference.problems, ...reference.mismatches].slice(0, 5).join("; "),
  );

  // --- counts: lost, excused, duplicated ---
  let lost = 0;
  let lostInFailed = 0;
  let lostReportedToGuest = 0;
  let duplicated = 0;
  let incrementsAcknowledged = 0;
  const counterProblems: string[] = [];
  let countersRead = 0;
  for (const s of input.sessions) {
    const l = lostOf(s, input.lastFrames.get(s.id));
    lost += l;
    if (s.failure) lostInFailed += l;
    if (s.failure && s.reportedLost === l) lostReportedToGuest += l;
    const acked = s.frames.filter(
      (f) => f.kind === "increment" && f.outcome === "ok" && f.result?.code === ErrorCode.OK,
    ).length;
    incrementsAcknowledged += acked;
    if (s.counterRead !== undefined) {
      countersRead++;
      if (s.counterRead > acked) duplicated += s.counterRead - acked;
      if (s.counterRead !== acked) {
        counterProblems.push(
          `session ${s.id}: counter ${s.counterRead}, ${acked} increments acknowledged`,
        );
      }
    }
  }
  const sb = input.stepDowns.reduce(
    (t, d) => ({
      acknowledgedFrames: t.acknowledgedFrames + d.discarded.acknowledgedFrames,
      frames: t.frames + d.discarded.frames,
      sessions: t.sessions + d.discarded.sessions,
      stepDowns: t.stepDowns + 1,
    }),
    { acknowledgedFrames: 0, frames: 0, sessions: 0, stepDowns: 0 },
  );
  const live = input.sessions.filter((s) => !s.failure).length;
  add(
    "no duplicated effects (increment counters = acknowledged increments)",
    counterProblems.length === 0 && countersRead === live && countersRead > 0,
    counterProblems.length > 0
      ? counterProblems.slice(0, 5).join("; ")
      : `${countersRead} of ${live} live sessions read their counter; ${incrementsAcknowledged} increments acknowledged in all`,
  );
  // Excuses: in peer mode, a split brain's discarded work as the nodes reported it (an upper
  // bound); in async mode, losses the client reported to its guest with the exact count.
  const bySplitBrain = input.lease === "peer" ? Math.min(lostInFailed, sb.acknowledgedFrames) : 0;
  const byAsync = input.mode === "async" ? lostReportedToGuest : 0;
  const lostExcused = Math.min(lost, bySplitBrain + byAsync);
  add(
    "no acknowledged frame lost (beyond reported split-brain or async losses)",
    lost - lostExcused === 0,
    `${lost} lost, ${lostExcused} excused (split brain reported ${sb.acknowledgedFrames} acknowledged frames discarded in ${sb.stepDowns} step-downs${input.mode === "async" ? `; ${lostReportedToGuest} reported to guests as async losses` : ""})`,
  );
  if (input.lease === "etcd") {
    add(
      "etcd lease: no primary discarded acknowledged work",
      sb.acknowledgedFrames === 0,
      `${sb.stepDowns} step-downs discarding ${sb.acknowledgedFrames} acknowledged frames`,
    );
  }

  // --- epochs ---
  const ackEpochNodes = new Map<number, Set<string>>();
  for (const a of input.acks) {
    const set = ackEpochNodes.get(a.epoch) ?? new Set<string>();
    set.add(a.nodeId);
    ackEpochNodes.set(a.epoch, set);
  }
  const pollEpochNodes = new Map<number, Set<string>>();
  for (const s of input.samples) {
    if (s.role !== "primary" || s.epoch === undefined) continue;
    const set = pollEpochNodes.get(s.epoch) ?? new Set<string>();
    set.add(s.node);
    pollEpochNodes.set(s.epoch, set);
  }
  const twoAck = [...ackEpochNodes].filter(([, n]) => n.size > 1);
  const twoPoll = [...pollEpochNodes].filter(([, n]) => n.size > 1);
  add(
    "one primary per epoch (acknowledgements and status polls)",
    twoAck.length === 0 && twoPoll.length === 0,
    twoAck.length + twoPoll.length === 0
      ? `epochs ${[...ackEpochNodes.keys()].sort((x, y) => x - y).join(",")} each acknowledged by one node`
      : [
          ...twoAck.map(([e, n]) => `epoch ${e} acknowledged by ${[...n].join(" and ")}`),
          ...twoPoll.map(([e, n]) => `epoch ${e} claimed primary by ${[...n].join(" and ")}`),
        ].join("; "),
  );
  const backwards: string[] = [];
  const lastBySlotSession = new Map<string, number>();
  for (const s of input.sessions) {
    for (const f of s.frames) {
      if (f.outcome !== "ok" || f.epoch === undefined) continue;
      const before = lastBySlotSession.get(s.id) ?? 0;
      if (f.epoch < before)
        backwards.push(`session ${s.id} frame ${f.number}: epoch ${f.epoch} after ${before}`);
      lastBySlotSession.set(s.id, Math.max(before, f.epoch));
    }
  }
  const lastByNode = new Map<string, number>();
  for (const s of input.samples) {
    if (s.epoch === undefined) continue;
    const before = lastByNode.get(s.node) ?? 0;
    if (s.epoch < before)
      backwards.push(
        `node ${s.node} at ${(s.atMs / 1000).toFixed(1)} s: epoch ${s.epoch} after ${before}`,
      );
    lastByNode.set(s.node, Math.max(before, s.epoch));
  }
  add(
    "epochs only grow (per session, per node)",
    backwards.length === 0,
    backwards.length === 0
      ? `highest epoch ${Math.max(0, ...lastByNode.values())}`
      : backwards.slice(0, 5).join("; "),
  );
  const overlaps = overlappingAcks(input.acks);
  // The epoch a node served at when it stepped down: its last status as primary before.
  const servedEpoch = (d: StepDown) =>
    input.samples
      .filter((s) => s.node === d.node && s.role === "primary" && s.atMs <= d.atMs)
      .reduce((e, s) => Math.max(e, s.epoch ?? 0), 0);
  const excusedEpochs = new Set(
    input.stepDowns.filter((d) => d.discarded.acknowledgedFrames > 0).map(servedEpoch),
  );
  const unexcused = overlaps.filter(
    (o) => input.lease === "etcd" || !excusedEpochs.has(o.lowEpoch),
  );
  add(
    "no two primaries acknowledging at once (outside reported split brains)",
    unexcused.length === 0,
    overlaps.length === 0
      ? `no acknowledgement of an older epoch more than ${OVERLAP_TOLERANCE_MS} ms after a newer one`
      : `${overlaps.length} overlaps, ${overlaps.length - unexcused.length} within a reported split brain: ${overlaps
          .slice(0, 3)
          .map(
            (o) =>
              `epoch ${o.lowEpoch} acknowledged ${o.afterMs} ms after epoch ${o.highEpoch}'s first`,
          )
          .join("; ")}`,
  );

  // --- liveness and convergence ---
  add(
    "replicas converge after the last fault",
    final.convergedMs !== undefined &&
      final.convergedMs <= CONVERGE_BOUND_MS &&
      final.primary?.state === final.standby?.state,
    final.convergedMs === undefined
      ? `digests not equal at one seq within ${CONVERGE_BOUND_MS / 1000} s`
      : `equal digests at seq ${final.primary?.seq} ${(final.convergedMs / 1000).toFixed(2)} s after the heal (bound ${CONVERGE_BOUND_MS / 1000} s)`,
  );
  add(
    "the nodes' own verify agrees",
    "equal" in final.verify && final.verify.equal,
    "equal" in final.verify
      ? `POST /v1/verify: equal ${final.verify.equal} at seq ${final.verify.seq}`
      : final.verify.error,
  );
  add(
    "probing sessions changed nothing",
    final.stateAfterProbes !== undefined && final.stateAfterProbes === final.primary?.state,
    final.stateAfterProbes === final.primary?.state
      ? "digest unchanged"
      : "the digest moved during the session probes",
  );
  const primaryFaults = input.faults.filter(
    (f) => (f.plan.kind === "kill" || f.plan.kind === "pause") && f.startMs !== undefined,
  );
  const noFailover = primaryFaults.filter((f) => f.failoverMs === undefined);
  add(
    "every primary kill and pause ends in a failover",
    noFailover.length === 0,
    noFailover.length === 0
      ? `${primaryFaults.length} failovers`
      : noFailover
          .map(
            (f) =>
              `fault #${f.plan.index} (${f.plan.kind}): no acknowledgement of a higher epoch within 30 s`,
          )
          .join("; "),
  );
  const executed = input.faults.filter((f) => f.startMs !== undefined);
  const unrecovered = executed.filter((f) => f.recoveredMs === undefined);
  add(
    "the pair recovers after every fault",
    input.nemesisStuck === undefined && unrecovered.length === 0 && executed.length > 0,
    executed.length === 0
      ? "no fault was injected"
      : (input.nemesisStuck ??
          (unrecovered.length === 0
            ? `${executed.length} faults, each followed by a healthy pair`
            : unrecovered
                .map((f) => `fault #${f.plan.index} (${f.plan.kind}) not recovered`)
                .join("; "))),
  );
  const faultErrors = executed.flatMap((f) => f.errors.map((e) => `#${f.plan.index}: ${e}`));
  add(
    "no node died on its own; the harness ran cleanly",
    input.unexpectedExits.length === 0 &&
      input.harnessErrors.length === 0 &&
      faultErrors.length === 0 &&
      input.allSettled,
    [
      ...input.unexpectedExits,
      ...input.harnessErrors,
      ...faultErrors,
      ...(input.allSettled ? [] : ["frames still unsettled 60 s after the load stopped"]),
    ]
      .slice(0, 5)
      .join("; ") || "no unexpected exit, every frame settled",
  );

  const counts: Counts = {
    framesSent: input.sessions.reduce((t, s) => t + s.frames.length, 0),
    framesAcknowledged: input.sessions.reduce(
      (t, s) => t + s.frames.filter((f) => f.outcome === "ok").length,
      0,
    ),
    lost,
    lostExcused,
    duplicated,
    incrementsAcknowledged,
    sessionsFailed: input.sessions.filter((s) => s.failure).length,
    splitBrainReported: sb,
  };
  return { verdicts, counts };
}

/** Acknowledgements of an epoch received after a higher epoch's first, beyond the tolerance. */
export function overlappingAcks(
  acks: readonly Ack[],
): { lowEpoch: number; highEpoch: number; afterMs: number }[] {
  const first = new Map<number, number>();
  for (const a of acks) if (!first.has(a.epoch)) first.set(a.epoch, a.atMs);
  const worst = new Map<number, { highEpoch: number; afterMs: number }>();
  for (const a of acks) {
    for (const [e, t] of first) {
      if (e > a.epoch && a.atMs - t > OVERLAP_TOLERANCE_MS) {
        const afterMs = Math.round(a.atMs - t);
        const w = worst.get(a.epoch);
        if (!w || afterMs > w.afterMs) worst.set(a.epoch, { highEpoch: e, afterMs });
      }
    }
  }
  return [...worst].map(([lowEpoch, w]) => ({ lowEpoch, ...w }));
}

export function percentiles(
  values: readonly number[],
): { p50: number; p99: number; max: number; n: number } | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  return { p50: at(0.5), p99: at(0.99), max: sorted.at(-1)!, n: sorted.length };
}
