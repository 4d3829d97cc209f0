// Proves the PrimaryDriver carries the machine's decisions out over its ports alone: with a
// manual clock and timers, a recorded peer link, a fake guest port and supervisor, it dials
// and streams, holds replies until the lease and the standby allow them, steps down on a
// higher epoch, decides another primary's hello, runs a switchover to its end, serves alone
// when it has no peer, and ignores etcd answers that come after it stopped; a fresh backend
// starts a history (a new lineage), a standby's replica keeps its own.
import {
  type Link,
  type PrimaryMessage,
  REPLICATION_PROTOCOL_VERSION,
  ReplicationLog,
  type StandbyMessage,
  type TimerHandle,
  type Timers,
} from "@vgpu-ha/common";
import { Backend, type BackendOptions } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import type { EtcdReadView } from "./core/primary-etcd.js";
import type { EtcdPort, GuestHooks, GuestPort, PrimaryObserver } from "./ports.js";
import { PrimaryDriver, type PrimaryDriverOptions } from "./primary-driver.js";
import { testStandbyHello } from "./testing/sender-options.js";

const backendOptions: BackendOptions = {
  device: { seed: 1, vramBytes: 1 << 20, maxBoBytes: 1 << 20, maxKernelWork: 1 << 20 },
  tenants: new Map(),
  session: { replyCacheFrames: 16, replyCacheBytes: 1 << 16 },
  maxDmaBytes: 1 << 16,
  maxStoresPerBatch: 16,
  trackMmio: false,
};

const options: PrimaryDriverOptions = {
  clusterId: "c",
  nodeId: "a",
  peerName: "b",
  configuredPrimary: true,
  mode: "sync",
  lease: { leaseMs: 300, heartbeatMs: 100, driftMarginMs: 30, maxDriftRatio: 0 },
  etcdPollMs: undefined,
  maxLagEntries: 1000,
  maxLagBytes: 1 << 20,
  maxLagMs: 120,
  maxApplyLagMs: 300,
  mmio: { mmio: "per-page", flushBytes: 1 << 20 },
  flushDelayMs: 1,
  sender: {
    maxBatchEntries: 16,
    maxBatchBytes: 65536,
    maxInflightEntries: 64,
    maxInflightBytes: 1 << 20,
    snapshotWindowChunks: 4,
    retransmitMs: 200,
    retainBytes: 1 << 20,
  },
  reconnectMs: 50,
  snapshotChunkBytes: 4096,
};

/** Timers on a manual clock: `advance` fires what is due, in order. */
class ManualTimers implements Timers {
  nowMs = 1000;
  private timers: { at: number; every: number | undefined; fn: () => void }[] = [];
  setTimeout(ms: number, fn: () => void): TimerHandle {
    const t = { at: this.nowMs + ms, every: undefined, fn };
    this.timers.push(t);
    return t;
  }
  setInterval(ms: number, fn: () => void): TimerHandle {
    const t = { at: this.nowMs + ms, every: ms, fn };
    this.timers.push(t);
    return t;
  }
  clear(timer: TimerHandle | undefined): void {
    this.timers = this.timers.filter((t) => t !== timer);
  }
  advance(ms: number): void {
    const end = this.nowMs + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= end).sort((x, y) => x.at - y.at)[0];
      if (due === undefined) break;
      this.nowMs = due.at;
      if (due.every === undefined) this.clear(due);
      else due.at += due.every;
      due.fn();
    }
    this.nowMs = end;
  }
}

/** One side of a link whose sends are recorded and whose input the test delivers. */
class RecordedLink<Out, In> implements Link<Out, In> {
  readonly sent: Out[] = [];
  closed: string | undefined;
  private onMsg: ((m: In) => void)[] = [];
  private onEnd: ((r: string) => void)[] = [];
  send(m: Out): boolean {
    this.sent.push(m);
    return true;
  }
  onMessage(h: (m: In) => void): void {
    this.onMsg.push(h);
  }
  onDrain(): void {}
  onClose(h: (r: string) => void): void {
    this.onEnd.push(h);
  }
  close(reason = "closed"): void {
    if (this.closed !== undefined) return;
    this.closed = reason;
    for (const h of this.onEnd) h(reason);
  }
  deliver(m: In): void {
    for (const h of this.onMsg) h(m);
  }
}

class FakeGuests implements GuestPort<string> {
  readonly hooks: GuestHooks;
  released = 0;
  paused = false;
  ended: string | undefined;
  releasedSeq = 0;
  ackedSeq = 0;
  heldReplies = 0;
  openStreams = 0;
  applied = { frames: 0, acknowledged: 0, sessions: 0 };
  constructor(hooks: GuestHooks) {
    this.hooks = hooks;
  }
  serve(): void {}
  release(): void {
    this.released++;
  }
  setPaused(paused: boolean): void {
    this.paused = paused;
  }
  endAll(message: string): void {
    this.ended = message;
  }
  reapIdle(): void {}
}

const quiet: PrimaryObserver = {
  notice: () => undefined,
  senderEvent: () => undefined,
  snapshotStarted: () => undefined,
  hello: () => undefined,
  guestMessage: () => undefined,
  etcdFailed: () => undefined,
  handingOver: () => undefined,
};

/** `lineage`: the history the backend already belongs to (a standby's replica; "": fresh). */
function setup(peer = true, etcd?: EtcdPort, lineage = "") {
  const timers = new ManualTimers();
  const links: RecordedLink<PrimaryMessage, StandbyMessage>[] = [];
  const stepDowns: [number, string][] = [];
  let guests: FakeGuests | undefined;
  const notices: string[] = [];
  const backend = new Backend(backendOptions);
  backend.lineage = lineage;
  const driver = new PrimaryDriver<string>(
    options,
    {
      clock: { monotonicMs: () => timers.nowMs, wallMs: () => 1_700_000_000_000 },
      timers,
      supervisor: {
        epoch: () => 1,
        stepDown: (epoch, reason) => stepDowns.push([epoch, reason]),
        adoptEpoch: () => undefined,
      },
      backend,
      log: new ReplicationLog(),
      newLineage: () => "lineage-1",
      dialPeer: peer
        ? () => {
            const link = new RecordedLink<PrimaryMessage, StandbyMessage>();
            links.push(link);
            return link;
          }
        : undefined,
      guests: (hooks) => {
        guests = new FakeGuests(hooks);
        return guests;
      },
      etcd,
      observer: { ...quiet, notice: (n) => notices.push(n.kind) },
    },
    false,
  );
  return { driver, timers, links, stepDowns, guests: guests!, notices };
}

/** The standby's ack of a heartbeat sent now, having applied `appliedSeq`. */
const ack = (nowMs: number, appliedSeq: number, extra: object = {}): StandbyMessage => ({
  kind: "ack",
  epoch: 1,
  receivedSeq: appliedSeq,
  appliedSeq,
  snapshotId: 0,
  snapshotChunk: 0,
  heartbeatSentUs: nowMs * 1000,
  checkpoints: [],
  ...extra,
});

function streaming() {
  const s = setup();
  s.driver.start();
  const link = s.links[0]!;
  link.deliver(testStandbyHello());
  link.deliver(ack(s.timers.nowMs, 0));
  return { ...s, link };
}

describe("PrimaryDriver", () => {
  it("dials at start, says hello, and holds the lease on acknowledged heartbeats", () => {
    const s = setup();
    expect(s.driver.releasable()).toBe(-1); // fenced before the standby answers
    s.driver.start();
    expect(s.links).toHaveLength(1);
    expect(s.links[0]!.sent[0]?.kind).toBe("hello");
    s.links[0]!.deliver(testStandbyHello());
    s.links[0]!.deliver(ack(s.timers.nowMs, 0));
    expect(s.driver.lease).toBe("leased");
    expect(s.notices).toContain("leaseChanged");
    expect(s.guests.released).toBeGreaterThan(0);
    expect(s.driver.connected).toBe(true);
  });

  it("starts a history with a new lineage, or goes on with its replica's, and says it", () => {
    for (const [kept, expected] of [
      ["", "lineage-1"],
      ["kept-history", "kept-history"],
    ] as const) {
      const s = setup(true, undefined, kept);
      expect(s.driver.backend.lineage).toBe(expected);
      s.driver.start();
      expect(s.links[0]!.sent[0]).toMatchObject({ kind: "hello", lineage: expected });
    }
  });

  it("loses the lease without acks and redials a broken link", () => {
    const s = streaming();
    s.timers.advance(300);
    expect(s.driver.lease).toBe("fenced");
    s.link.close("broken");
    expect(s.driver.connected).toBe(false);
    s.timers.advance(options.reconnectMs);
    expect(s.links).toHaveLength(2);
  });

  it("steps down when the standby reports a higher epoch", () => {
    const s = streaming();
    s.link.deliver(ack(s.timers.nowMs, 0, { epoch: 5 }));
    expect(s.stepDowns).toEqual([[5, "peer is at epoch 5"]]);
  });

  it("decides another primary's hello on its first message", () => {
    const s = streaming();
    const stranger = new RecordedLink<StandbyMessage, PrimaryMessage>();
    s.driver.acceptReplication(stranger, "10.0.0.9:1");
    stranger.deliver({
      kind: "hello",
      epoch: 9,
      clusterId: "x",
      nodeId: "b",
      firstRetainedSeq: 1,
      lastSeq: 0,
    });
    expect(stranger.sent[0]?.kind).toBe("error");
    expect(stranger.closed).toBe("not our peer");
    expect(s.stepDowns).toEqual([]);
    const newer = new RecordedLink<StandbyMessage, PrimaryMessage>();
    s.driver.acceptReplication(newer, "10.0.0.2:1");
    const hello = {
      kind: "hello",
      epoch: 3,
      clusterId: "c",
      nodeId: "b",
      firstRetainedSeq: 1,
      lastSeq: 0,
      protocolVersion: REPLICATION_PROTOCOL_VERSION,
    } as const;
    newer.deliver(hello);
    newer.deliver(hello); // a duplicate decides nothing more
    expect(s.stepDowns).toEqual([[3, "met primary b of epoch 3"]]);
  });

  it("runs a switchover: guests pause, the handover goes out, the step-down settles it", () => {
    const s = streaming();
    const outcomes: unknown[] = [];
    expect(s.driver.switchover(1000, (o) => outcomes.push(o))).toBeUndefined();
    expect(s.guests.paused).toBe(true);
    expect(s.driver.handingOver).toBe(true);
    const handover = s.link.sent.find((m) => m.kind === "handover");
    expect(handover).toMatchObject({ kind: "handover", lastSeq: 0 });
    expect(s.driver.handedOver()).toEqual({ backend: s.driver.backend, lastSeq: 0 });
    expect(s.driver.switchover(1000, () => undefined)?.code).toBeDefined(); // one at a time
    s.driver.steppedDown();
    let digest = "";
    s.driver.digest((d) => {
      digest = d;
    });
    expect(outcomes).toEqual([{ ok: true, seq: 0, digest, pauseMs: 0 }]);
  });

  it("refuses a switchover without a standby in sync, and fails one the standby never takes", () => {
    const idle = setup();
    idle.driver.start();
    expect(idle.driver.switchover(1000, () => undefined)?.message).toBe(
      "no standby in sync to hand over to",
    );
    const s = streaming();
    const outcomes: { ok: boolean; code?: number }[] = [];
    s.driver.switchover(100, (o) => outcomes.push(o));
    s.timers.advance(60); // keep the lease: the standby acks, but never accepts
    s.link.deliver(ack(s.timers.nowMs, 0));
    s.timers.advance(60);
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]!.ok).toBe(false);
    expect(s.guests.paused).toBe(false);
    expect(s.driver.handingOver).toBe(false);
  });

  it("serves alone without a peer: every reply released, the log kept short", () => {
    const s = setup(false);
    s.driver.start();
    expect(s.driver.releasable()).toBeUndefined();
    expect(s.driver.lease).toBe("alone");
    s.guests.hooks.afterApply();
    expect(s.guests.released).toBe(1);
    expect(s.guests.hooks.serving()).toBe(true);
  });

  it("stops: guests ended, the link closed, no more dials, late etcd answers ignored", () => {
    let answer: ((e: Error | undefined, v: EtcdReadView | undefined) => void) | undefined;
    let acquired = false;
    const etcd: EtcdPort = {
      holding: false,
      leaseEndMs: () => Number.NEGATIVE_INFINITY,
      onLost: undefined,
      read: (done) => {
        answer = done;
      },
      acquire: () => {
        acquired = true;
      },
      setReplica: () => undefined,
      resign: () => undefined,
    };
    const s = setup(true, etcd);
    const driver = new PrimaryDriver<string>(
      { ...options, etcdPollMs: 20 },
      {
        clock: { monotonicMs: () => s.timers.nowMs, wallMs: () => 0 },
        timers: s.timers,
        supervisor: { epoch: () => 1, stepDown: () => undefined, adoptEpoch: () => undefined },
        backend: new Backend(backendOptions),
        log: new ReplicationLog(),
        newLineage: () => "lineage-2",
        dialPeer: () => new RecordedLink<PrimaryMessage, StandbyMessage>(),
        guests: (hooks) => new FakeGuests(hooks),
        etcd,
        observer: quiet,
      },
      false,
    );
    driver.start();
    s.timers.advance(100);
    expect(answer).toBeDefined();
    driver.stop("bye");
    answer!(undefined, { leader: undefined, record: undefined });
    expect(acquired).toBe(false);
    s.driver.start();
    s.driver.stop("shutting down");
    expect(s.guests.ended).toBe("shutting down");
    expect(s.links[0]!.closed).toBe("primary stopping");
    expect(s.guests.hooks.serving()).toBe(false);
    s.timers.advance(1000);
    expect(s.links).toHaveLength(1);
  });
});
