// Proves, through the shipped StandbyDriver over hand-driven ports (peer mode, a device the test
// completes or fails), that a standby whose replica's device fails never takes over with it and
// says so: failing while a takeover waits for its backlog (the wait used to last for ever, since
// a failed device answers no afterDevice), the takeover is given up and the node is told once
// (Supervisor.deviceFailed); failing while idle (its done seq then says complete), the expiry
// that follows promotes nothing; and a device that completes its backlog still takes over.
import { Backend, ManualExecutor } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import type { StandbyNote } from "./core/standby-machine.js";
import { StandbyDriver } from "./standby-driver.js";
import { ManualTimers, streamTo } from "./testing/driver-ports.js";
import {
  deviceTestOptions as options,
  primaryOfFive,
  testPrimaryHello,
} from "./testing/test-primary.js";

const LEASE = { leaseMs: 300, heartbeatMs: 100, driftMarginMs: 10, maxDriftRatio: 0.001 };

/** A granted standby of epoch 6 that received seqs 1..5, its device (the test's) not run yet. */
function granted() {
  const timers = new ManualTimers();
  const executor = new ManualExecutor();
  const backendOptions = options(1, executor);
  const notes: StandbyNote[] = [];
  const promoted: string[] = [];
  const failures: { reason: string; seq: number }[] = [];
  const driver = new StandbyDriver<never>({
    receiver: { clusterId: "c", nodeId: "b", backendOptions },
    peerName: "a",
    peerGuestAddress: "a:1",
    configuredPrimary: false,
    lease: LEASE,
    etcd: undefined,
    now: () => timers.nowMs,
    timers,
    supervisor: {
      epoch: () => 6,
      promote: (reason) => promoted.push(reason),
      stepDown: () => undefined,
      adoptEpoch: () => undefined,
      probePeer: (done) => done(undefined),
      maintenancePaused: () => false,
      adoptMaintenance: () => undefined,
      deviceFailed: (failure) => failures.push(failure),
    },
    guests: { pause: () => undefined, refuse: () => undefined },
    logger: { info: () => undefined, warn: () => undefined },
    observer: { note: (n) => notes.push(n) },
  });
  driver.adopt(new Backend(backendOptions), 0); // an empty replica of the pair's start
  driver.start();
  const send = streamTo(driver);
  const p = primaryOfFive();
  send(testPrimaryHello({ epoch: 6 }));
  send({ kind: "entries", epoch: 6, entries: p.entries }); // no hold: all to the device
  send({ kind: "heartbeat", epoch: 6, sentUs: 1, lastSeq: 5, syncReplica: true });
  expect(driver.receiver.eligible).toBe(true);
  const backlog = driver.backlog; // the entries with device work (writes), not yet run
  expect(backlog).toBeGreaterThan(0);
  return { timers, executor, driver, notes, promoted, failures, backlog };
}

const kinds = (notes: readonly StandbyNote[]) => notes.map((n) => n.kind);

describe("a standby whose device fails", () => {
  it("during the takeover's backlog wait: gives the takeover up and tells the node, once", () => {
    const s = granted();
    s.timers.advance(1000); // the primary's lease ran out: the takeover waits for the device
    expect(s.driver.takingOver).toBe(true);
    expect(kinds(s.notes)).toContain("awaitingBacklog");
    s.executor.fail("device operation ran past device.maxCallMs");
    expect(s.failures).toHaveLength(1);
    expect(s.failures[0]!.reason).toBe("device operation ran past device.maxCallMs");
    expect(s.failures[0]!.seq).toBeGreaterThan(5 - s.backlog); // the oldest entry not applied
    expect(s.driver.takingOver).toBe(false);
    const failed = s.notes.find((n) => n.kind === "deviceFailed");
    expect(failed).toMatchObject({ takeoverDropped: true, backlog: s.backlog });
    s.timers.advance(5000); // nothing more: no promotion, no second report
    expect(s.promoted).toEqual([]);
    expect(s.failures).toHaveLength(1);
    expect(s.driver.takeover(true)).toBeUndefined(); // not even forced
    expect(s.driver.probe().replica).toBe(false);
  });

  it("while idle (its done seq says complete): the expiry after it promotes nothing", () => {
    const s = granted();
    s.executor.runAll(); // the backlog applied: the device is idle
    expect(s.driver.backlog).toBe(0);
    s.executor.fail("device thread exited (code 1)");
    expect(s.failures).toEqual([{ reason: "device thread exited (code 1)", seq: 0 }]);
    expect(s.notes.find((n) => n.kind === "deviceFailed")).toMatchObject({
      takeoverDropped: false,
    });
    s.timers.advance(5000);
    expect(s.promoted).toEqual([]);
    expect(kinds(s.notes)).not.toContain("awaitingBacklog");
    expect(s.failures).toHaveLength(1);
  });

  it("a device that completes the backlog still takes over (the wait is answered)", () => {
    const s = granted();
    s.timers.advance(1000);
    expect(s.driver.takingOver).toBe(true);
    s.executor.runAll();
    s.timers.advance(1100);
    expect(s.promoted).toEqual(["lease_expired"]);
    expect(s.failures).toEqual([]);
    expect(s.driver.takeover()?.lastSeq).toBe(5);
  });
});
