// One seeded failover run: two full nodes (supervisor, primary and standby roles, the real
// core) with drifting clocks, guests running the seeded workload through the client's
// exactly-once logic, and faults — crashes and restarts, pauses shorter and longer than the
// lease, partitions both ways and one way, broken streams, switchovers, message loss,
// duplication and delay, devices that lag (device.ts) — for a window of a few leases. Then everything heals and the pair
// must settle within a bound: one primary, an in-sync standby, equal replicas, every guest done.
// The Checker judges safety all along and the settled state at the end. The same simulation
// runs the scenario files step by step (FailoverSimulation's actions) with no random faults.
import type { CallResult, wire } from "@vgpu-ha/common";
import { type Backend, computeDigest } from "@vgpu-ha/gpu-model";
import { SimRng } from "../rng.js";
import { backendOptionsFor, generateWorkload, type Workload } from "../workload.js";
import { Checker, type GuestRecord } from "./checker.js";
import { SimEtcd } from "./etcd.js";
import { SimGuest } from "./guest-app.js";
import { Lineages } from "./lineage.js";
import { Network } from "./net.js";
import { SimNode } from "./node.js";
import { type FailoverParams, type FaultPlan, NODES, type NodeName, peerOf } from "./params.js";
import { SimProcess } from "./process.js";
import { emptyFailoverStats, type FailoverStats } from "./stats.js";
import { wireWorkload } from "./wire-workload.js";
import { SimFailure, World } from "./world.js";

const MAX_EVENTS = 3_000_000;

export interface FailoverResult {
  readonly seed: number;
  readonly failure: string | undefined;
  readonly endMs: number;
  readonly lastSeq: number;
  readonly digest: string;
  readonly trace: number;
  readonly stats: FailoverStats;
}

export class FailoverSimulation {
  readonly params: FailoverParams;
  readonly world = new World();
  readonly stats = emptyFailoverStats();
  readonly checker: Checker;
  readonly net: Network;
  readonly lineages = new Lineages();
  /** etcd mode: the etcd cluster. */
  readonly etcd: SimEtcd | undefined;
  readonly nodes: Record<NodeName, SimNode>;
  readonly guests: SimGuest[] = [];
  private readonly workload: Workload;
  private readonly rng: { faults: SimRng; guests: SimRng; wake: SimRng };
  private nextStep = 0;
  private issueWaiting = false;
  private issueArmed = false;
  /** Issue frames on a timer (random runs) or only when a script says so. */
  private readonly autoIssue: boolean;
  /** Script mode: how many more steps the guests may send. */
  private issueBudget: number;
  healed = false;
  readonly notes: string[] = [];
  /** The device failure plan (params deviceFailure) has found its backlog wait. */
  private deviceFailureTaken = false;

  constructor(
    params: FailoverParams,
    options: { autoIssue?: boolean; onTrace?: (line: string) => void } = {},
  ) {
    this.params = params;
    this.autoIssue = options.autoIssue ?? true;
    this.issueBudget = this.autoIssue ? Number.POSITIVE_INFINITY : 0;
    const root = new SimRng(params.seed);
    this.rng = { faults: root.fork(11), guests: root.fork(12), wake: root.fork(13) };
    this.checker = new Checker(this.world, params, this.stats);
    this.checker.pair = {
      primaryOf: (node) => (this.nodes[node].process() ? this.nodes[node].primary : undefined),
      etcdLeader: () => this.etcd?.leaderNow,
      liveStates: () => this.liveStates(),
      heldFrames: (backend) => this.heldFrames(backend),
      // etcd mode: the record, not the heartbeat, says which standby may take over.
      eligible: (node) => {
        const r = this.nodes[node].standby?.receiver;
        if (r === undefined) return false;
        if (!this.etcd) return r.eligible;
        return r.state === "replica" && this.etcd.recordNow?.replica === node;
      },
    };
    this.net = new Network(this.world, params.network, params.guestLatencyMs, root.fork(14));
    // A lost message is a network failure too (split brain may follow).
    this.net.onDrop = () => this.checker.networkFailed();
    const g = params.guests;
    this.workload = wireWorkload(
      generateWorkload(params.seed, {
        frames: g.frames,
        sessions: g.sessions,
        tenants: g.tenants,
        invalidPercent: g.invalidPercent,
        resendPercent: 0,
      }),
    );
    const nodeRng = root.fork(15);
    // A pair that ran before (epochs on disk) left its record in etcd: the newest term's.
    const { a, b } = params.initialEpoch;
    const record =
      a + b > 0 ? { epoch: Math.max(a, b), primary: a >= b ? "a" : "b", replica: "" } : undefined;
    this.etcd = params.etcd
      ? new SimEtcd(this.world, params.etcd, root.fork(16), record)
      : undefined;
    if (this.etcd) this.stats.etcdRuns = 1;
    const options0 = backendOptionsFor(this.workload, params.seed & 0xffff);
    const make = (name: NodeName) =>
      new SimNode(name, {
        world: this.world,
        params,
        net: this.net,
        lineages: this.lineages,
        checker: this.checker,
        stats: this.stats,
        rng: nodeRng.fork(name === "a" ? 1 : 2),
        backendOptions: {
          ...options0,
          device: { ...options0.device, seed: (params.seed & 0xffff) + (name === "a" ? 0 : 1000) },
        },
        etcd: this.etcd,
        peer: () => this.nodes[peerOf(name)],
        note: (line) => this.note(line),
        deviceFailureTaken: () => {
          const taken = this.deviceFailureTaken;
          this.deviceFailureTaken = true;
          return taken;
        },
      });
    this.nodes = { a: make("a"), b: make("b") };
    this.world.onTrace = options.onTrace;
    this.world.describe = () => this.describe();
    this.makeGuests();
  }

  private note(line: string): void {
    this.notes.push(`t=${this.world.nowMs.toFixed(3)} ${line}`);
    if (this.notes.length > 200) this.notes.shift();
  }

  // ---- guests ----

  private makeGuests(): void {
    const g = this.params.guests;
    const guestProc = new SimProcess(
      this.world,
      "guests",
      1,
      { rate: 1, jitterMs: 0 },
      this.rng.guests.fork(1),
    );
    for (const [i, s] of this.workload.sessions.entries()) {
      const frames = new Map(
        this.workload.steps
          .filter((st) => st.session === s.id)
          .map((st) => [st.frame.number, st.frame]),
      );
      const endpoints: NodeName[] = this.rng.guests.chance(0.5) ? ["a", "b"] : ["b", "a"];
      const guest: SimGuest = new SimGuest(
        {
          name: `g${i}`,
          workloadSession: s.id,
          tenant: s.tenant,
          endpoints,
          keepaliveMs: g.keepaliveMs,
          connectTimeoutMs: g.connectTimeoutMs,
          retryMaxMs: g.retryMaxMs,
        },
        {
          proc: guestProc,
          rng: this.rng.guests.fork(100 + i),
          dial: (node, timeoutMs) => {
            const target = this.nodes[node];
            return this.net.open<wire.GuestMessage, wire.NodeMessage>(
              { name: `g${i}`, proc: guestProc },
              { name: node, host: target },
              { timeoutMs, kind: "guest" },
              (server) => target.serveGuest(server),
            );
          },
          settled: (gst, frame, result, reply) => this.settled(gst, frame, result, reply),
          progress: () => this.onGuestProgress(),
        },
      );
      const record: GuestRecord = { guest, frames, acked: new Map() };
      this.checker.guests.set(guest, record);
      this.guests.push(guest);
    }
  }

  private record(guest: SimGuest): GuestRecord {
    return this.checker.guests.get(guest)!;
  }

  private settled(guest: SimGuest, frame: number, result: CallResult, reply: object): void {
    this.checker.guestSettled(this.record(guest), frame, result, this.checker.tagOf(reply));
  }

  private onGuestProgress(): void {
    if (this.issueWaiting) {
      this.issueWaiting = false;
      this.armIssue(0);
    }
  }

  private armIssue(delayMs: number): void {
    if (this.issueArmed) return;
    this.issueArmed = true;
    this.world.after(delayMs, "issue", () => {
      this.issueArmed = false;
      this.issue();
    });
  }

  /** The guests send the workload's steps in order, each session within its window. */
  private issue(): void {
    const steps = this.workload.steps;
    while (this.nextStep < steps.length && this.issueBudget > 0) {
      const step = steps[this.nextStep]!;
      const guest = this.guests[Number(step.session.slice(1))]!;
      if (guest.failure) {
        this.nextStep++; // a failed session sends nothing more
        continue;
      }
      if (!guest.isOpen || guest.unsettled >= this.params.guests.windowFrames) {
        this.issueWaiting = true;
        return;
      }
      this.nextStep++;
      this.issueBudget--;
      this.stats.framesIssued++;
      const number = guest.push(step.frame.body);
      if (number !== step.frame.number) {
        throw new SimFailure(
          `${guest.options.name} numbered frame ${number}, the workload ${step.frame.number}`,
        );
      }
      if (this.autoIssue) {
        this.armIssue(this.rng.guests.exponential(this.params.guests.issueGapMs));
        return;
      }
    }
  }

  get allIssued(): boolean {
    return this.nextStep >= this.workload.steps.length;
  }

  // ---- actions (faults, and the scenario files' steps) ----

  start(node: NodeName): void {
    const n = this.nodes[node];
    if (n.process() !== undefined) return;
    if (n.proc !== undefined) this.stats.restarts++;
    n.boot();
  }

  crash(node: NodeName): void {
    this.nodes[node].crash();
  }

  pause(node: NodeName): void {
    this.nodes[node].pause();
  }

  resume(node: NodeName): void {
    this.nodes[node].resume(this.rng.wake.chance(0.5));
  }

  /** Cuts what `from` sends to `to` (one way), or both ways. */
  partition(from: NodeName, oneWay: boolean, kill: boolean): void {
    this.checker.networkFailed();
    const killAfter = kill ? { afterMs: this.params.lease.leaseMs * 2 } : undefined;
    this.net.cut(from, peerOf(from), killAfter);
    if (!oneWay) this.net.cut(peerOf(from), from, killAfter);
  }

  healPartition(): void {
    this.net.uncut("a", "b");
    this.net.uncut("b", "a");
  }

  /** etcd mode: `node` loses etcd, or both do (etcd is away). */
  cutEtcd(node: NodeName | "both"): void {
    this.stats.etcdCuts++;
    for (const n of node === "both" ? NODES : [node]) this.etcd?.cut(n);
  }

  healEtcd(): void {
    for (const n of NODES) this.etcd?.uncut(n);
  }

  resetLinks(): void {
    this.stats.resets++;
    this.net.resetStreams("a", "b");
  }

  /** A guest's network blips: its streams to both nodes break (it reconnects elsewhere). */
  resetGuest(index: number): void {
    this.stats.guestResets++;
    for (const n of NODES) this.net.resetStreams(`g${index}`, n);
  }

  /** A planned switchover on whichever node is primary; the refusal, if any. */
  switchover(onSettled?: (outcome: string) => void): string | undefined {
    this.stats.switchoversRequested++;
    const primary = NODES.map((n) => this.nodes[n]).find((n) => n.primary !== undefined);
    if (primary === undefined) return "no primary";
    const refusal = primary.switchover((outcome) => {
      if (outcome === "done") this.stats.switchoversDone++;
      else this.stats.switchoversFailed++;
      onSettled?.(outcome);
    });
    if (refusal !== undefined) this.stats.switchoversFailed++;
    return refusal;
  }

  startGuests(): void {
    for (const g of this.guests) g.open();
  }

  /** Script mode: the guests send the next `frames` steps of the workload. */
  send(frames: number): void {
    this.issueBudget += frames;
    this.issue();
  }

  /** Steps left for the guests to send. */
  get stepsLeft(): number {
    return this.workload.steps.length - this.nextStep;
  }

  /** Runs the world until `untilMs`: every event due by then. */
  advanceTo(untilMs: number): void {
    while (this.world.stepUntil(untilMs)) {
      if (this.world.events > MAX_EVENTS) throw new SimFailure(`more than ${MAX_EVENTS} events`);
    }
    this.world.nowMs = Math.max(this.world.nowMs, untilMs);
  }

  // ---- the random run ----

  run(): FailoverResult {
    let failure: string | undefined;
    let digest = "";
    let lastSeq = 0;
    try {
      this.schedule();
      this.loop();
      const settled = this.finalCheck();
      digest = settled.digest;
      lastSeq = settled.lastSeq;
    } catch (e) {
      const what = e instanceof SimFailure ? e.message : `crash: ${(e as Error).stack ?? e}`;
      failure = `seed ${this.params.seed} at t=${this.world.nowMs.toFixed(3)}ms: ${what}\n  state: ${this.describe()}\n  recent: ${this.notes.slice(-12).join("\n          ")}`;
    }
    for (const g of this.guests) this.stats.guestResumes += g.resumes;
    const link = this.net.linkStats;
    this.stats.messagesDropped = link.dropped;
    this.stats.messagesDuplicated = link.duplicated;
    this.stats.messagesReordered = link.reordered;
    this.stats.events = this.world.events;
    if (this.etcd) this.stats.etcdKeyExpired = this.etcd.stats.expired;
    return {
      seed: this.params.seed,
      failure,
      endMs: this.world.nowMs,
      lastSeq,
      digest,
      trace: this.world.trace,
      stats: this.stats,
    };
  }

  private schedule(): void {
    const p = this.params;
    for (const n of NODES) this.world.at(p.startMs[n], `start ${n}`, () => this.start(n));
    this.world.at(this.rng.guests.real(0, p.lease.leaseMs), "guests open", () => {
      this.startGuests();
      this.armIssue(0);
    });
    for (const f of p.faults) this.world.at(f.atMs, `fault ${f.kind}`, () => this.inject(f));
    this.world.at(p.faultWindowMs, "heal", () => this.heal());
  }

  private inject(f: FaultPlan): void {
    if (this.healed) return;
    const end = (kind: string, fn: () => void) =>
      this.world.after(f.durationMs, kind, () => {
        if (!this.healed) fn();
      });
    const L = this.params.lease.leaseMs;
    switch (f.kind) {
      case "crash": {
        this.crash(f.node);
        end(`restart ${f.node}`, () => this.start(f.node));
        return;
      }
      case "pause": {
        if (this.nodes[f.node].proc?.state !== "running") return;
        if (f.durationMs > L) this.stats.pausesLong++;
        else this.stats.pausesShort++;
        this.pause(f.node);
        end(`resume ${f.node}`, () => this.resume(f.node));
        return;
      }
      case "partition": {
        if (f.oneWay) this.stats.partitionsOneWay++;
        else this.stats.partitionsTwoWay++;
        if (f.killsConnections) this.stats.partitionKills++;
        this.partition(f.node, f.oneWay, f.killsConnections);
        end("heal partition", () => this.healPartition());
        return;
      }
      case "reset":
        this.resetLinks();
        return;
      case "switchover":
        this.switchover();
        return;
      case "guestReset":
        this.resetGuest(f.durationMs % this.guests.length);
        return;
      case "etcdCut":
        this.cutEtcd(f.oneWay ? f.node : "both");
        end("etcd back", () => this.healEtcd());
        return;
    }
  }

  /** Faults stop: partitions heal, paused processes wake, dead ones restart. */
  heal(): void {
    this.healed = true;
    this.net.heal();
    this.healEtcd();
    for (const n of NODES) {
      const node = this.nodes[n];
      if (node.proc?.state === "paused") this.resume(n);
      if (node.process() === undefined) this.start(n);
    }
  }

  private loop(): void {
    const bound = this.params.faultWindowMs + this.params.livenessBoundMs;
    for (;;) {
      if (this.healed && this.quiescent()) return;
      if (this.world.nowMs > bound) {
        throw new SimFailure(
          `liveness: not settled ${this.params.livenessBoundMs}ms after healing`,
        );
      }
      if (this.world.events > MAX_EVENTS) throw new SimFailure(`more than ${MAX_EVENTS} events`);
      if (!this.world.step()) throw new SimFailure("nothing left to happen");
    }
  }

  /**
   * Script mode's end: everything heals (crashed nodes restart), the guests send what is left,
   * and the pair must settle within the liveness bound; then the final checks.
   */
  settle(): { digest: string; lastSeq: number } {
    this.heal();
    this.issueBudget = Number.POSITIVE_INFINITY;
    this.issue();
    const bound = this.world.nowMs + this.params.livenessBoundMs;
    while (!this.quiescent()) {
      if (this.world.nowMs > bound) {
        throw new SimFailure(
          `liveness: not settled ${this.params.livenessBoundMs}ms after healing`,
        );
      }
      if (this.world.events > MAX_EVENTS) throw new SimFailure(`more than ${MAX_EVENTS} events`);
      if (!this.world.step()) throw new SimFailure("nothing left to happen");
    }
    return this.finalCheck();
  }

  /** One primary, an in-sync granted standby, guests done, nothing held. */
  quiescent(): boolean {
    const pair = this.pair();
    if (pair === undefined) return false;
    const { primary, standby } = pair;
    const p = primary.primary!;
    const s = standby.standby!;
    if (!this.allIssued) return false;
    for (const g of this.guests) if (!g.failure && (!g.isOpen || g.unsettled > 0)) return false;
    return (
      p.lease === "leased" &&
      p.sender.state === "streaming" &&
      p.sender.appliedSeq === p.log.lastSeq &&
      !p.sequencer.mmioPending &&
      p.guests.heldReplies === 0 &&
      p.backend.progress.doneSeq(p.log.lastSeq) === p.log.lastSeq &&
      s.receiver.state === "replica" &&
      s.receiver.appliedSeq === p.log.lastSeq &&
      s.receiver.eligible
    );
  }

  /** What a standby whose replica is `backend` received and holds for its primary's device. */
  private heldFrames(backend: Backend): Set<string> {
    const keys = new Set<string>();
    for (const n of NODES) {
      const r = this.nodes[n].standby?.receiver;
      if (r?.backend !== backend) continue;
      for (const { body } of r.heldList) {
        if (body.kind === "call") keys.add(`${body.sessionId}#${body.frame}`);
        else if (body.kind === "sessionOpen") keys.add(`${body.sessionId}#open`);
        else if (body.kind === "mmioPages" || body.kind === "mmioStore") {
          for (const f of body.frames) keys.add(`${f.sessionId}#${f.frame}`);
        }
      }
    }
    return keys;
  }

  /** The states live processes hold that could serve: primaries' and replicas'. */
  private liveStates(): Backend[] {
    const out: Backend[] = [];
    for (const n of NODES) {
      const node = this.nodes[n];
      if (node.process() === undefined) continue;
      const p = node.primary;
      if (p) out.push(p.backend);
      // A standby's replica, also while a snapshot replaces it (it could still take over).
      const r = node.standby?.receiver;
      if (r?.backend && (r.state === "replica" || r.state === "snapshot")) out.push(r.backend);
    }
    return out;
  }

  /** The primary and the standby when the pair has exactly one of each, both running. */
  pair(): { primary: SimNode; standby: SimNode } | undefined {
    const running = NODES.map((n) => this.nodes[n]).filter(
      (n) => n.proc?.state === "running" && n.decided,
    );
    if (running.length !== 2) return undefined;
    const primaries = running.filter((n) => n.primary !== undefined);
    if (primaries.length !== 1) return undefined;
    const primary = primaries[0]!;
    const standby = this.nodes[peerOf(primary.name)];
    if (standby.standby === undefined) return undefined;
    return { primary, standby };
  }

  finalCheck(): { digest: string; lastSeq: number } {
    const pair = this.pair();
    if (pair === undefined) throw new SimFailure("no primary/standby pair at the end");
    const p = pair.primary.primary!;
    const s = pair.standby.standby!;
    const history = this.lineages.of(p.backend);
    if (history.length !== p.log.lastSeq) {
      throw new SimFailure(
        `the primary's history holds ${history.length} entries, its log ${p.log.lastSeq}`,
      );
    }
    // The reference replays on an inline device of its own.
    const { executor: _device, ...options } = p.deps.backendOptions;
    this.checker.finalChecks(
      history,
      this.lineages.of(s.receiver.backend!),
      p.backend,
      s.receiver.backend!,
      { ...options, device: { ...options.device, seed: options.device.seed + 77 } },
    );
    return { digest: computeDigest(p.backend).state, lastSeq: p.log.lastSeq };
  }

  describe(): string {
    return [
      ...NODES.map((n) => this.nodes[n].describe()),
      `issued ${this.nextStep}/${this.workload.steps.length}`,
      ...this.guests.map((g) => g.describe()),
    ].join(" ");
  }
}

/** Runs one seeded failover simulation. */
export function simulateFailover(
  params: FailoverParams,
  onTrace?: (line: string) => void,
): FailoverResult {
  return new FailoverSimulation(params, { onTrace }).run();
}
