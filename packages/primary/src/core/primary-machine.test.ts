// Proves the primary machine composes the lease, release, grant, back-pressure, step-down and
// hello rules as the role needs them: driven over a real Sender and log with explicit times,
// it moves leased → fenced → degraded, releases only what the lease and the grant allow,
// grants and revokes the standby with notices, pauses guests on lag, reacts to the Sender's
// events, decides on another primary's hello (another protocol version refused), and (etcd
// mode) asks etcd and applies answers.
import {
  ErrorCode,
  type PrimaryMessage,
  RELEASE_NONE,
  REPLICATION_PROTOCOL_VERSION,
} from "@vgpu-ha/common/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MachineSetup } from "../testing/primary-machine-setup.js";
import type { PrimaryAction } from "./primary-machine.js";

const kinds = (actions: readonly PrimaryAction[]) =>
  actions.map((a) => (a.kind === "notice" ? `notice:${a.notice.kind}` : a.kind));

/** Where the tests' clocks start (a heartbeat sent at 0 would count as none). */
const T = 1000;

const NAME = { kind: "setReplica", epoch: 1, replica: "b", purpose: "name" } as const;
const CLEAR = { kind: "setReplica", epoch: 1, replica: "", purpose: "clear" } as const;
const HANDOVER = { kind: "setReplica", epoch: 1, replica: "b", purpose: "handover" } as const;

const leaseChanges = (actions: readonly PrimaryAction[]) =>
  actions.flatMap((a) =>
    a.kind === "notice" && a.notice.kind === "leaseChanged"
      ? [`${a.notice.from}>${a.notice.to}`]
      : [],
  );

/** A started machine whose standby streams and has acknowledged a heartbeat at t=0. */
function leased(): MachineSetup {
  const s = new MachineSetup();
  s.machine.start(s.facts(), false);
  s.connect();
  s.ack(0);
  s.machine.tick(s.facts());
  return s;
}

describe("the lease", () => {
  it("starts fenced and is held once a heartbeat is acknowledged", () => {
    const s = new MachineSetup();
    s.machine.start(s.facts(), false);
    expect(s.machine.lease).toBe("fenced");
    s.connect();
    s.ack(0);
    const out = s.machine.tick(s.facts());
    expect(s.machine.lease).toBe("leased");
    expect(leaseChanges(out)).toEqual(["fenced>leased"]);
    expect(kinds(out)).toContain("release");
  });

  it("lapses at the acknowledged send time + lease − margin, then degrades a lease later", () => {
    const s = leased();
    expect(leaseChanges(s.machine.tick(s.at(T + 269).facts()))).toEqual([]);
    expect(leaseChanges(s.machine.tick(s.at(T + 270).facts()))).toEqual(["leased>fenced"]);
    for (let t = 320; t < 570; t += 50) s.machine.tick(s.at(T + t).facts());
    expect(s.machine.lease).toBe("fenced");
    expect(leaseChanges(s.machine.tick(s.at(T + 570).facts()))).toEqual(["fenced>degraded"]);
  });

  it("counts the lease thread's acknowledged heartbeats as the stream's", () => {
    const s = leased();
    s.leaseThreadAckedMs = T + 200;
    s.machine.tick(s.at(T + 400).facts());
    expect(s.machine.lease).toBe("leased");
    expect(s.machine.servingLeaseEndMs(s.facts())).toBe(T + 470);
  });

  it("serves at once, degraded, when promoted", () => {
    const s = new MachineSetup();
    s.append(3);
    s.machine.start(s.facts(), true);
    expect(s.machine.lease).toBe("degraded");
    expect(s.machine.confirmedSeq).toBe(3);
    expect(s.machine.releasable(s.facts())).toBeUndefined();
  });

  it("ignores ticks once stopped", () => {
    const s = leased();
    s.machine.stop();
    expect(s.machine.tick(s.at(10_000).facts())).toEqual([]);
    expect(s.machine.lease).toBe("leased");
  });
});

describe("what may be released", () => {
  it("nothing while fenced, only what the granted standby applied while leased", () => {
    const s = new MachineSetup();
    s.machine.start(s.facts(), false);
    s.append(5);
    expect(s.machine.releasable(s.facts())).toBe(RELEASE_NONE);
    s.connect();
    s.ack(5);
    s.machine.progress(s.facts());
    expect(s.machine.grant.granted).toBe(true);
    s.append(2);
    expect(s.machine.releasable(s.facts())).toBe(5);
    s.ack(7);
    s.machine.progress(s.facts());
    expect(s.machine.releasable(s.facts())).toBe(7);
  });

  it("judges the lease by the clock even before the timer ran", () => {
    const s = leased();
    expect(s.machine.releaseView(s.at(T + 270).facts()).lease).toBe("fenced");
    expect(s.machine.lease).toBe("leased");
  });

  it("everything in async mode while leased", () => {
    const s = new MachineSetup({ mode: "async" });
    s.machine.start(s.facts(), false);
    s.connect();
    s.ack(0);
    s.machine.tick(s.facts());
    s.append(4);
    expect(s.machine.releasable(s.facts())).toBeUndefined();
  });

  it("never releases anything while the view is fenced, whatever the acks (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ dt: fc.integer({ min: 1, max: 400 }), ack: fc.boolean() }), {
          maxLength: 30,
        }),
        (steps) => {
          const s = new MachineSetup();
          s.machine.start(s.facts(), false);
          s.connect();
          for (const step of steps) {
            s.at(s.nowMs + step.dt);
            s.append(1);
            if (step.ack) s.ack(s.log.lastSeq);
            s.machine.progress(s.facts());
            const view = s.machine.releaseView(s.facts());
            const seq = s.machine.releasable(s.facts());
            if (view.lease === "fenced") expect(seq).toBe(RELEASE_NONE);
            if (view.granted && seq !== undefined) expect(seq).toBeLessThanOrEqual(view.appliedSeq);
          }
        },
      ),
    );
  });
});

describe("the standby's grant", () => {
  it("is given once the standby applied everything released, and revoked when degraded", () => {
    const s = new MachineSetup();
    s.machine.start(s.facts(), false);
    s.connect();
    s.append(3);
    s.releasedSeq = 3;
    s.ack(2);
    expect(kinds(s.machine.progress(s.facts()))).not.toContain("notice:grantChanged");
    s.ack(3);
    const out = s.machine.progress(s.facts());
    expect(out).toContainEqual({ kind: "notice", notice: { kind: "grantChanged", granted: true } });
    expect(s.sender.syncGrant).toBe(true);
    for (let t = 100; t <= 600; t += 100) s.machine.tick(s.at(T + t).facts());
    expect(s.machine.lease).toBe("degraded");
    expect(s.machine.grant.granted).toBe(false);
    expect(s.sender.syncGrant).toBe(false);
  });
});

describe("back-pressure", () => {
  it("holds guests while the standby lags by entries, bytes or age; never while down", () => {
    const s = new MachineSetup({ maxLagEntries: 3, maxLagMs: 50 });
    s.machine.start(s.facts(), false);
    expect(s.machine.backPressure(T)).toBe(false);
    s.connect();
    s.append(3);
    expect(s.machine.backPressure(T)).toBe(false);
    s.append(1);
    expect(s.machine.backPressure(T)).toBe(true);
    s.ack(4);
    expect(s.machine.backPressure(T)).toBe(false);
    s.append(1);
    expect(s.machine.backPressure(T + 51)).toBe(true);
    // A fence entry of these tests is 65 bytes on the wire.
    const bytes = new MachineSetup({ maxLagBytes: 100 });
    bytes.machine.start(bytes.facts(), false);
    bytes.connect();
    bytes.append(1);
    expect(bytes.machine.backPressure(T)).toBe(false);
    bytes.append(1);
    expect(bytes.machine.backPressure(T)).toBe(true);
  });

  it("leaves the guests as they are during a switchover", () => {
    const s = leased();
    s.machine.switchingOver = true;
    expect(s.machine.backPressure(T)).toBeUndefined();
  });
});

describe("the Sender's events", () => {
  it("a higher epoch steps the role down", () => {
    const s = leased();
    expect(s.machine.senderEvent({ kind: "higherEpoch", epoch: 4 }, 0)).toEqual([
      { kind: "stepDown", epoch: 4, reason: "peer is at epoch 4" },
    ]);
  });

  it("an accepted handover sends the guests over (and in etcd mode names the standby)", () => {
    const s = leased();
    const out = s.machine.senderEvent({ kind: "handoverAccepted" }, 0);
    expect(kinds(out)).toEqual(["notice:handoverAccepted", "endGuests"]);
    expect(s.machine.handedOff).toBe(true);
    const e = new MachineSetup({ etcd: { configuredPrimary: true, pollMs: 50 } });
    expect(e.machine.senderEvent({ kind: "handoverAccepted" }, 0).at(-1)).toEqual({
      kind: "etcd",
      request: HANDOVER,
    });
    expect(e.machine.etcdAnswered(HANDOVER, true)).toEqual([
      { kind: "etcd", request: { kind: "resign" } },
    ]);
  });

  it("an accepted handover asks etcd even while another request is under way", () => {
    const s = new MachineSetup({ etcd: { configuredPrimary: true, pollMs: 50 } });
    s.etcd = { holding: true, leaseEndMs: T + 10_000 };
    s.machine.start(s.facts(), false);
    s.connect();
    s.ack(0);
    expect(s.machine.tick(s.facts())).toContainEqual({ kind: "etcd", request: NAME });
    expect(s.machine.senderEvent({ kind: "handoverAccepted" }, 0).at(-1)).toEqual({
      kind: "etcd",
      request: HANDOVER,
    });
    // Each answer is read by its own request, whichever comes first.
    expect(kinds(s.machine.etcdAnswered(NAME, true))).toEqual(["notice:etcdNamed"]);
    expect(s.machine.etcdAnswered(HANDOVER, true)).toEqual([
      { kind: "etcd", request: { kind: "resign" } },
    ]);
  });

  it("other events ask nothing of the role", () => {
    const s = leased();
    expect(s.machine.senderEvent({ kind: "resumed", fromSeq: 3 }, 0)).toEqual([]);
  });
});

describe("another primary's hello", () => {
  const hello = (over: Partial<Extract<PrimaryMessage, { kind: "hello" }>>): PrimaryMessage => ({
    kind: "hello",
    epoch: 1,
    clusterId: "c",
    nodeId: "b",
    firstRetainedSeq: 1,
    lastSeq: 0,
    protocolVersion: REPLICATION_PROTOCOL_VERSION,
    ...over,
  });

  it("breaks a tie of epochs by node id, as otherPrimaryWins does", () => {
    const s = leased();
    // At equal epochs the lower node id wins: "a" (us) keeps serving, "b" is refused.
    expect(s.machine.hello(hello({ epoch: 2 }), 2).kind).toBe("refuseLower");
  });

  it("steps down for a higher epoch, refuses a lower one", () => {
    const s = leased();
    expect(s.machine.hello(hello({ epoch: 3 }), 2)).toEqual({
      kind: "stepDown",
      epoch: 3,
      reason: "met primary b of epoch 3",
    });
    expect(s.machine.hello(hello({ epoch: 1 }), 2)).toEqual({ kind: "refuseLower" });
  });

  it("refuses a stranger before its epoch counts, and a stream without a hello", () => {
    const s = leased();
    const stranger = s.machine.hello(hello({ clusterId: "other", epoch: 9 }), 2);
    expect(stranger.kind).toBe("refuse");
    if (stranger.kind === "refuse") expect(stranger.refusal.code).toBe(ErrorCode.WRONG_CLUSTER);
    const impostor = s.machine.hello(hello({ nodeId: "z", epoch: 9 }), 2);
    expect(impostor.kind).toBe("refuse");
    const heartbeat = { kind: "heartbeat", epoch: 9 } as unknown as PrimaryMessage;
    expect(s.machine.hello(heartbeat, 2).kind).toBe("refuse");
  });

  it("refuses its peer of another protocol version before its epoch counts", () => {
    const s = leased();
    const other = s.machine.hello(hello({ epoch: 9, version: "9.0.0", protocolVersion: 9 }), 2);
    expect(other.kind).toBe("refuse");
    if (other.kind === "refuse") {
      expect(other.refusal.code).toBe(ErrorCode.INCOMPATIBLE_VERSION);
      expect(other.refusal.message).toContain("vgpud 9.0.0 (replication protocol 9)");
    }
  });
});

describe("what a step-down discards", () => {
  it("nothing while leased; the work since the lease was lost once it was", () => {
    const s = leased();
    s.append(2);
    s.ack(2);
    s.machine.progress(s.facts());
    expect(s.machine.soloWork(s.facts()).entries).toBe(0);
    for (let t = 100; t <= 600; t += 100) s.machine.tick(s.at(T + t).facts());
    s.append(3);
    s.applied = { ...s.applied, acknowledged: s.applied.acknowledged + 3 };
    const solo = s.machine.soloWork(s.facts());
    expect(solo.entries).toBe(3);
    expect(solo.acknowledgedFrames).toBe(3);
  });
});

describe("etcd mode", () => {
  function etcdLeased(): MachineSetup {
    const s = new MachineSetup({ etcd: { configuredPrimary: true, pollMs: 50 } });
    s.etcd = { holding: true, leaseEndMs: T + 10_000 };
    s.machine.start(s.facts(), false);
    s.connect();
    s.ack(0);
    return s;
  }

  it("serves on the etcd lease alone", () => {
    const s = etcdLeased();
    s.machine.tick(s.facts());
    expect(s.machine.releaseView(s.at(5_000).facts()).lease).toBe("leased");
    s.etcd = { holding: true, leaseEndMs: T + 4_000 };
    expect(s.machine.releaseView(s.facts()).lease).toBe("fenced");
  });

  it("names the standby in the record once due, and grants it when written", () => {
    const s = etcdLeased();
    const out = s.machine.tick(s.facts());
    expect(out).toContainEqual({
      kind: "etcd",
      request: { kind: "setReplica", epoch: 1, replica: "b", purpose: "name" },
    });
    expect(s.machine.grant.granted).toBe(true);
    expect(s.sender.syncGrant).toBe(false);
    expect(kinds(s.machine.tick(s.facts()))).not.toContain("etcd"); // one request at a time
    expect(kinds(s.machine.etcdAnswered(NAME, true))).toEqual(["notice:etcdNamed"]);
    expect(s.sender.syncGrant).toBe(true);
  });

  it("clears the name when the link lapses, and drops the grant only once written", () => {
    const s = etcdLeased();
    s.machine.tick(s.facts());
    s.machine.etcdAnswered(NAME, true);
    const out = s.machine.tick(s.at(T + 300).facts());
    expect(out).toContainEqual({
      kind: "etcd",
      request: { kind: "setReplica", epoch: 1, replica: "", purpose: "clear" },
    });
    expect(s.sender.syncGrant).toBe(false);
    expect(s.machine.grant.granted).toBe(true);
    expect(kinds(s.machine.etcdAnswered(CLEAR, true))).toEqual(["notice:etcdCleared", "release"]);
    expect(s.machine.grant.granted).toBe(false);
  });

  it("takes a lost key back when the rule allows, adopting the record's new epoch", () => {
    const s = etcdLeased();
    s.etcd = { holding: false, leaseEndMs: Number.NEGATIVE_INFINITY };
    const read = s.machine.tick(s.at(T + 100).facts());
    expect(read).toContainEqual({ kind: "etcd", request: { kind: "read" } });
    expect(kinds(s.machine.tick(s.at(T + 120).facts()))).not.toContain("etcd");
    const acquire = s.machine.etcdRead({
      leader: undefined,
      record: { epoch: 1, primary: "a", replica: "" },
    });
    expect(acquire).toEqual([{ kind: "etcd", request: { kind: "acquire", epoch: 2 } }]);
    expect(kinds(s.machine.etcdAnswered({ kind: "acquire", epoch: 2 }, true))).toEqual([
      "adoptEpoch",
      "notice:keyRetaken",
      "release",
    ]);
    expect(s.sender.epoch).toBe(2);
  });

  it("does not retake a key another node holds, nor during a switchover", () => {
    const s = etcdLeased();
    s.etcd = { holding: false, leaseEndMs: Number.NEGATIVE_INFINITY };
    s.machine.tick(s.at(T + 100).facts());
    expect(s.machine.etcdRead({ leader: { nodeId: "b" }, record: undefined })).toEqual([]);
    s.machine.switchingOver = true;
    expect(s.machine.tick(s.at(1_000).facts())).toEqual([]);
  });

  it("ignores answers that come after the role stopped", () => {
    const s = etcdLeased();
    s.etcd = { holding: false, leaseEndMs: Number.NEGATIVE_INFINITY };
    s.machine.tick(s.at(T + 100).facts());
    const acquire = s.machine.etcdRead({ leader: undefined, record: undefined });
    expect(acquire).toHaveLength(1);
    s.machine.stop();
    expect(s.machine.etcdAnswered({ kind: "acquire", epoch: 2 }, true)).toEqual([]);
    expect(s.sender.epoch).toBe(1);
  });

  it("asks nothing while its etcd lease has lapsed", () => {
    const s = etcdLeased();
    s.etcd = { holding: true, leaseEndMs: T - 1 };
    expect(kinds(s.machine.tick(s.facts()))).not.toContain("etcd");
  });

  it("names the standby again after a write etcd refused", () => {
    const s = etcdLeased();
    s.machine.tick(s.facts());
    expect(s.machine.etcdAnswered(NAME, false)).toEqual([]);
    expect(s.sender.syncGrant).toBe(false);
    expect(s.machine.named).toBe(false);
    expect(s.machine.tick(s.facts())).toContainEqual({
      kind: "etcd",
      request: { kind: "setReplica", epoch: 1, replica: "b", purpose: "name" },
    });
    s.machine.etcdAnswered(NAME, true);
    expect(s.machine.named).toBe(true);
  });

  it("shows the etcd lease's end as the serving lease's", () => {
    const s = etcdLeased();
    expect(s.machine.servingLeaseEndMs(s.facts())).toBe(T + 10_000);
    expect(s.machine.etcdMode).toBe(true);
    expect(new MachineSetup().machine.etcdMode).toBe(false);
  });
});

describe("the standby's confirmed seq", () => {
  it("counts only what a streaming standby applied, and survives the link", () => {
    const s = leased();
    s.append(4);
    s.ack(3);
    s.machine.progress(s.facts());
    expect(s.machine.confirmedSeq).toBe(3);
    s.sender.disconnected();
    s.machine.progress(s.facts());
    expect(s.machine.confirmedSeq).toBe(3);
    expect(s.machine.releaseView(s.facts()).link).toBe("down");
    // Granted, the link down: only what the standby confirmed may go out.
    expect(s.machine.releasable(s.facts())).toBe(3);
  });

  it("tells the observer of a revoked grant", () => {
    const s = leased();
    expect(s.machine.grant.granted).toBe(true);
    const notices: unknown[] = [];
    for (let t = 100; t <= 600; t += 100) {
      for (const a of s.machine.tick(s.at(T + t).facts()))
        if (a.kind === "notice") notices.push(a.notice);
    }
    expect(notices).toContainEqual({ kind: "grantChanged", granted: false });
    expect(notices).toContainEqual({ kind: "leaseChanged", from: "fenced", to: "degraded" });
  });
});
