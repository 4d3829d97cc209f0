// A PrimaryMachine over a real Sender and log, for the machine's tests: a standby "b" that
// streams, acknowledges heartbeats and applies entries when told.
import { type EntryBody, ReplicationLog, type StandbyMessage } from "@vgpu-ha/common";
import {
  type PrimaryFacts,
  PrimaryMachine,
  type PrimaryMachineOptions,
} from "../core/primary-machine.js";
import { Sender } from "../core/sender.js";
import { testSenderOptions, testStandbyHello } from "./sender-options.js";

/** Lease 300 ms, margin 30: a heartbeat acknowledged at t holds the lease until t + 270. */
export const TEST_LEASE = { leaseMs: 300, heartbeatMs: 100, driftMarginMs: 30, maxDriftRatio: 0 };

export function testMachineOptions(
  overrides: Partial<PrimaryMachineOptions> = {},
): PrimaryMachineOptions {
  return {
    identity: { clusterId: "c", nodeId: "a", peerName: "b" },
    mode: "sync",
    lease: TEST_LEASE,
    etcd: undefined,
    maxLagEntries: 1000,
    maxLagBytes: 1 << 20,
    maxLagMs: 120,
    maxApplyLagMs: 300,
    ...overrides,
  };
}

const fence = (frame: number): EntryBody => ({
  kind: "call",
  sessionId: "s",
  frame,
  call: { op: "fence", context: 1 },
  handles: { contextsCreated: [], contextsDestroyed: [], bosAssigned: [], bosReleased: [] },
  result: { code: 0, outputDigest: new Uint8Array(9) },
});

export class MachineSetup {
  readonly log = new ReplicationLog();
  readonly sender: Sender;
  readonly machine: PrimaryMachine;
  /** Starts at 1000: a heartbeat sent at 0 would count as none. */
  nowMs = 1000;
  releasedSeq = 0;
  applied = { frames: 0, acknowledged: 0, sessions: 0 };
  etcd: { holding: boolean; leaseEndMs: number } | undefined;
  leaseThreadAckedMs: number | undefined;
  /** The primary's device: done with everything unless a test says otherwise. */
  deviceDoneSeq = Number.POSITIVE_INFINITY;

  constructor(overrides: Partial<PrimaryMachineOptions> = {}, epoch = 1) {
    this.sender = new Sender(
      testSenderOptions(),
      this.log,
      () => {
        throw new Error("no snapshot in these tests");
      },
      epoch,
    );
    this.machine = new PrimaryMachine(testMachineOptions(overrides), this.sender, this.log);
  }

  facts(): PrimaryFacts {
    return {
      nowMs: this.nowMs,
      releasedSeq: this.releasedSeq,
      applied: this.applied,
      leaseThreadAckedMs: this.leaseThreadAckedMs,
      etcd: this.etcd,
      deviceDoneSeq: this.deviceDoneSeq,
    };
  }

  /** Appends `n` entries (frames applied by guests). */
  append(n: number): void {
    for (let i = 0; i < n; i++) {
      this.log.append(fence(this.log.lastSeq + 1), this.nowMs);
      this.applied = { ...this.applied, frames: this.applied.frames + 1 };
    }
  }

  /** The standby connects and streams. */
  connect(): void {
    this.sender.connected(this.nowMs);
    this.sender.poll(this.nowMs);
    this.sender.step(testStandbyHello({ lastAppliedSeq: this.log.lastSeq }), this.nowMs);
  }

  /** The standby acknowledges a heartbeat sent now, having applied `appliedSeq`. */
  ack(appliedSeq = this.sender.appliedSeq, extra: Partial<StandbyMessage> = {}): void {
    this.sender.poll(this.nowMs);
    const ack = {
      kind: "ack",
      epoch: this.sender.epoch,
      receivedSeq: appliedSeq,
      appliedSeq,
      snapshotId: 0,
      snapshotChunk: 0,
      heartbeatSentUs: Math.round(this.nowMs * 1000),
      checkpoints: [],
      ...extra,
    } as StandbyMessage;
    this.sender.step(ack, this.nowMs);
  }

  at(nowMs: number): this {
    this.nowMs = nowMs;
    return this;
  }
}
