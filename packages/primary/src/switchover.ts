// The planned switchover's driver: carries out core/primary-switchover.ts's states over the
// timers (a 2 ms poll while draining, a deadline while handing over) and computes the digests
// (off the pure machine: they read the whole backend, hashed by the device: digestWhenDone).
import { type Clock, ErrorCode, type TimerHandle, type Timers } from "@vgpu-ha/common";
import { digestWhenDone } from "@vgpu-ha/gpu-model";
import type { PrimaryMachine } from "./core/primary-machine.js";
import {
  beginSwitchover,
  handOver,
  pollDrain,
  SWITCHOVER_IDLE,
  type SwitchoverState,
} from "./core/primary-switchover.js";
import type { Sequencer } from "./core/sequencer.js";
import type { GuestPort, PrimaryObserver } from "./ports.js";

/** How often a draining switchover looks again. */
const DRAIN_POLL_MS = 2;

export type SwitchoverOutcome =
  | { readonly ok: true; readonly seq: number; readonly digest: string; readonly pauseMs: number }
  /** `code`: the catalogue's, where the failure has one (the standby did not take over). */
  | { readonly ok: false; readonly why: string; readonly code?: ErrorCode };

/** Why a switchover was not begun (`message` undefined: the code's catalogue text). */
export interface SwitchoverRefusal {
  readonly code: ErrorCode;
  readonly message?: string;
}

export interface SwitchoverDeps {
  readonly clock: Clock;
  readonly timers: Timers;
  readonly machine: PrimaryMachine;
  readonly guests: () => GuestPort<unknown>;
  readonly sequencer: Sequencer;
  /** Sends the handover now, even past a full stream buffer. */
  readonly pumpNow: () => void;
  readonly observer: PrimaryObserver;
}

export class Switchover {
  private readonly deps: SwitchoverDeps;
  private state: SwitchoverState = SWITCHOVER_IDLE;
  private settled: ((outcome: SwitchoverOutcome) => void) | undefined;
  /** The digest at the announced seq, once the device has hashed it. */
  private earlyDigest: { readonly lastSeq: number; digest: string | undefined } | undefined;
  private timer: TimerHandle | undefined;

  constructor(deps: SwitchoverDeps) {
    this.deps = deps;
  }

  /** Starts one; why not, or undefined. */
  begin(
    timeoutMs: number,
    settled: (outcome: SwitchoverOutcome) => void,
  ): SwitchoverRefusal | undefined {
    const { machine, sequencer, clock } = this.deps;
    const sender = machine.sender;
    if (!sender.inSync || machine.lease !== "leased") {
      return { code: ErrorCode.HANDOVER_FAILED, message: "no standby in sync to hand over to" };
    }
    if (this.state.phase !== "idle") return { code: ErrorCode.SWITCHOVER_IN_PROGRESS };
    this.settled = settled;
    this.deps.guests().setPaused(true);
    machine.switchingOver = true;
    sequencer.flushMmio();
    // Announce the handover at the last seq (an empty digest): the standby computes its digest
    // there while this node computes its own — side by side, not one after the other.
    this.state = beginSwitchover(clock.monotonicMs(), timeoutMs, sequencer.log.lastSeq);
    sender.handover("");
    this.deps.pumpNow();
    const early = { lastSeq: sequencer.log.lastSeq, digest: undefined as string | undefined };
    this.earlyDigest = early;
    digestWhenDone(sequencer.backend, (d) => {
      early.digest = d.state;
    });
    this.poll();
    return undefined;
  }

  private poll(): void {
    const { machine, clock, sequencer } = this.deps;
    if (machine.stopped || this.state.phase !== "draining") return;
    const step = pollDrain(this.state, {
      nowMs: clock.monotonicMs(),
      lastSeq: sequencer.log.lastSeq,
      appliedSeq: machine.sender.appliedSeq,
      inSync: machine.sender.inSync,
      heldReplies: this.deps.guests().heldReplies,
      // etcd mode: the standby takes over only by the record naming it: wait until it does.
      unnamed: !machine.named,
    });
    if (step.kind === "wait") {
      this.timer = this.deps.timers.setTimeout(DRAIN_POLL_MS, () => this.poll());
      return;
    }
    if (step.kind === "failed") {
      this.fail(step.why);
      return;
    }
    const early = this.earlyDigest;
    if (step.reuseDigest && early?.lastSeq === step.lastSeq && early.digest !== undefined) {
      this.handOverWith(step.lastSeq, early.digest);
      return;
    }
    // The digest at the drained seq, once the device has hashed it (nothing moves: guests wait).
    const state = this.state;
    digestWhenDone(sequencer.backend, (d) => {
      if (this.state === state && !machine.stopped) this.handOverWith(step.lastSeq, d.state);
    });
  }

  /** Drained and digested: the handover goes out; the standby has until the deadline. */
  private handOverWith(lastSeq: number, digest: string): void {
    const { machine, clock } = this.deps;
    this.state = handOver(this.state, clock.monotonicMs(), lastSeq, digest);
    const deadlineMs = this.state.phase === "handing" ? this.state.deadlineMs : 0;
    this.timer = this.deps.timers.setTimeout(deadlineMs - clock.monotonicMs(), () =>
      this.fail("the standby did not take over", ErrorCode.STANDBY_TIMED_OUT),
    );
    this.deps.observer.handingOver(lastSeq, digest);
    machine.sender.handover(digest);
    this.deps.pumpNow();
  }

  private fail(why: string, code?: ErrorCode): void {
    const { machine } = this.deps;
    this.deps.timers.clear(this.timer);
    this.state = SWITCHOVER_IDLE;
    machine.switchingOver = false;
    machine.sender.cancelHandover();
    // etcd mode: a standby that accepted but did not get the key cannot serve; the key
    // decides, so guests may come back. (Peer mode: it took over; its dial steps us down.)
    if (!machine.stopped) {
      if (machine.etcdMode) machine.handedOff = false;
      this.deps.guests().setPaused(false);
    }
    this.settle(code === undefined ? { ok: false, why } : { ok: false, why, code });
  }

  private settle(outcome: SwitchoverOutcome): void {
    const settled = this.settled;
    this.settled = undefined;
    settled?.(outcome);
  }

  /** The seq handed over at, while handing over. */
  handedOverAt(): number | undefined {
    return this.state.phase === "handing" ? this.state.lastSeq : undefined;
  }

  /** The node stepped down: the switchover is done (if one was handing over). */
  steppedDown(): void {
    const s = this.state;
    if (s.phase !== "handing") return;
    this.deps.timers.clear(this.timer);
    this.state = SWITCHOVER_IDLE;
    const pauseMs = this.deps.clock.monotonicMs() - s.startedMs;
    this.settle({ ok: true, seq: s.lastSeq, digest: s.digest, pauseMs });
  }

  /** The role stopped: a drain still under way fails now; a handover waits for the step-down. */
  stop(): void {
    if (this.state.phase !== "draining") return;
    this.fail("the role stopped before the standby caught up");
  }
}
