// Proves the takeover of failover seed 6635 through the shipped StandbyDriver over hand-driven
// ports (etcd mode): the primary crashed while its standby took a snapshot, with entries held
// for the standby's device. The standby does not take the key while the record's primary may
// still hold the state; once that node is back empty, it takes over with the best state left —
// the replica the snapshot was replacing plus the held entries, applied by its device first —
// without recursing in awaitDevice (it overflowed the stack), on an inline device or one that
// completes later.
import type { ClusterRecord, PeerView } from "@vgpu-ha/common";
import {
  Backend,
  computeDigest,
  digestWhenDone,
  ManualExecutor,
  SnapshotSource,
  type StateDigest,
} from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import type { EtcdReading } from "./core/standby-machine.js";
import { StandbyDriver } from "./standby-driver.js";
import { ManualTimers, streamTo } from "./testing/driver-ports.js";
import {
  deviceTestOptions as options,
  primaryOfFive,
  testPrimaryHello,
} from "./testing/test-primary.js";

const LEASE = { leaseMs: 300, heartbeatMs: 100, driftMarginMs: 10, maxDriftRatio: 0.001 };
const POLL_MS = 50;

function scenario(device: "inline" | "later") {
  const timers = new ManualTimers();
  // Each backend (the replica, a snapshot's) its own device, completing when the test says.
  const executors: ManualExecutor[] = [];
  const backendOptions = {
    ...options(1),
    ...(device === "later"
      ? {
          executor: () => {
            const e = new ManualExecutor();
            executors.push(e);
            return e;
          },
        }
      : {}),
  };
  const notes: string[] = [];
  const promoted: { reason: string; force: boolean; epoch: number | undefined }[] = [];
  let peer: PeerView | undefined; // the old primary: down (no answer) until it restarts
  const record: ClusterRecord = { epoch: 6, primary: "a", replica: "" };
  const driver = new StandbyDriver<never, EtcdReading>({
    receiver: { clusterId: "c", nodeId: "b", backendOptions },
    peerName: "a",
    peerGuestAddress: "a:1",
    configuredPrimary: false,
    lease: LEASE,
    etcd: {
      port: {
        read: (done) => done(undefined, { leader: undefined, record }),
        acquire: (_view, _epoch, done) => done(undefined, true),
      },
      pollMs: POLL_MS,
    },
    now: () => timers.nowMs,
    timers,
    supervisor: {
      epoch: () => 6,
      promote: (reason, force = false, epoch) => promoted.push({ reason, force, epoch }),
      stepDown: () => undefined,
      adoptEpoch: () => undefined,
      probePeer: (done) => done(peer),
      maintenancePaused: () => false,
      adoptMaintenance: () => undefined,
      deviceFailed: () => undefined,
    },
    guests: { pause: () => undefined, refuse: () => undefined },
    logger: { info: () => undefined, warn: () => undefined },
    observer: { note: (n) => notes.push(n.kind) },
  });
  driver.adopt(new Backend(backendOptions), 0); // an empty replica of the pair's start
  driver.start();
  const restartPeerEmpty = () => {
    peer = { nodeId: "a", role: "standby", epoch: 6, replica: false, appliedSeq: 0 };
  };
  const runDevice = () => {
    for (const e of executors) e.run(Number.POSITIVE_INFINITY);
  };
  return { timers, driver, promoted, restartPeerEmpty, runDevice, notes };
}

describe.each(["inline", "later"] as const)("a standby mid-snapshot (%s device)", (device) => {
  it("takes over with the replica being replaced and its held entries once the peer is back empty", () => {
    const s = scenario(device);
    const p = primaryOfFive();
    const send = streamTo(s.driver);
    send(testPrimaryHello({ epoch: 6 }));
    expect(s.driver.link.connected).toBe(true);
    send({ kind: "entries", epoch: 6, entries: p.entries, primaryDoneSeq: 2 }); // 3..5 held
    s.runDevice();
    const chunk = new SnapshotSource(p.backend, 1, 5, 4096).next()!;
    send({ kind: "snapshot", epoch: 6, chunk }); // chunk 0 of several; then the primary crashes
    const r = s.driver.receiver;
    expect(r.state).toBe("snapshot");
    expect(r.heldEntries).toBe(3);

    // The lease runs out; the record names a, which may hold the newest state: no takeover.
    s.timers.advance(2000);
    expect(s.promoted).toEqual([]);
    expect(s.driver.holdsReplica).toBe(true);
    expect(r.heldEntries).toBe(0); // released to the kept replica's device
    expect(s.driver.probe().appliedSeq).toBe(5);

    // a restarts with nothing: this replica is the best state left.
    s.restartPeerEmpty();
    s.timers.advance(2100);
    s.runDevice();
    s.timers.advance(2200);
    expect(s.promoted).toEqual([{ reason: "etcd_key_acquired", force: true, epoch: 7 }]);
    expect(s.notes).toContain("etcdKeyAcquired");
    expect(r.backlog).toBe(0);
    const takeover = s.driver.takeover(true)!;
    expect(takeover.lastSeq).toBe(5);
    let digest: StateDigest | undefined;
    digestWhenDone(takeover.backend, (d) => {
      digest = d;
    });
    s.runDevice();
    expect(digest?.state).toBe(computeDigest(p.backend).state);
    s.driver.stop("promoted"); // the snapshot it was taking is abandoned
    expect(r.snapshotProgress).toBeUndefined();
  });
});
