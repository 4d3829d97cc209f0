// Proves the standby's eligibility follows the primary's sync grant: a replica is eligible
// only while its primary's newest heartbeat grants it (or a handover made it an exact copy),
// and it loses the grant on revocation, on a newer epoch, on divergence and when a snapshot
// starts; a late copy of an older heartbeat changes nothing.
import type { PrimaryMessage } from "@vgpu-ha/common/core";
import { Backend, computeDigest, SnapshotSource } from "@vgpu-ha/gpu-model";
import { describe, expect, it } from "vitest";
import { replicaReceiver, testBackendOptions } from "../testing/backend-options.js";

const replica = replicaReceiver;

const hb = (syncReplica: boolean, epoch = 3, sentUs = 1000): PrimaryMessage => ({
  kind: "heartbeat",
  epoch,
  sentUs,
  lastSeq: 0,
  syncReplica,
});

describe("the sync grant", () => {
  it("an adopted replica waits for the grant; heartbeats grant and revoke it", () => {
    const r = replica();
    expect(r.state).toBe("replica");
    expect(r.eligible).toBe(false);
    r.step(hb(true));
    expect(r.eligible).toBe(true);
    r.step(hb(false));
    expect(r.eligible).toBe(false);
  });

  it("a newer epoch's primary must grant anew", () => {
    const r = replica();
    r.step(hb(true));
    r.step({ kind: "entries", epoch: 4, entries: [] });
    expect(r.eligible).toBe(false);
    r.step(hb(true, 4));
    expect(r.eligible).toBe(true);
  });

  it("a stale primary's grant is refused", () => {
    const r = replica(5);
    r.step(hb(true, 4));
    expect(r.eligible).toBe(false);
  });

  it("a late copy of an older heartbeat does not bring a revoked grant back", () => {
    const r = replica();
    r.step(hb(true, 3, 1000));
    r.step(hb(false, 3, 2000));
    r.step(hb(true, 3, 1000)); // reordered or duplicated
    expect(r.eligible).toBe(false);
    expect(r.ack().heartbeatSentUs).toBe(2000);
    r.step(hb(true, 3, 3000));
    expect(r.eligible).toBe(true);
  });

  it("a new primary's heartbeats count on its own clock", () => {
    const r = replica();
    r.step(hb(true, 3, 900_000));
    r.step(hb(true, 4, 1000));
    expect(r.eligible).toBe(true);
    expect(r.ack().heartbeatSentUs).toBe(1000);
  });

  it("the first chunk of a snapshot ends the grant", () => {
    const r = replica();
    r.step(hb(true));
    const chunk = new SnapshotSource(new Backend(testBackendOptions()), 9, 0, 1 << 20).next()!;
    r.step({ kind: "snapshot", epoch: 3, chunk });
    // (one chunk: the snapshot is installed at once — a new replica, not yet granted)
    expect(r.granted).toBe(false);
    expect(r.eligible).toBe(false);
  });
});

describe("an announced handover", () => {
  const handover = (lastSeq: number, digest: string): PrimaryMessage => ({
    kind: "handover",
    epoch: 3,
    lastSeq,
    digest,
  });

  it("is accepted with the digest computed at the announcement, and grants", () => {
    const r = replica();
    r.step(handover(0, ""));
    expect(r.takeEvents()).toEqual([]);
    const digest = computeDigest(r.backend!).state;
    const [ack] = r.step(handover(0, digest));
    expect(ack).toMatchObject({ kind: "ack", handoverAccepted: true });
    expect(r.eligible).toBe(true);
  });

  it("a different digest after the announcement is divergence", () => {
    const r = replica();
    r.step(handover(0, ""));
    const out = r.step(handover(0, "0".repeat(64)));
    expect(out.map((m) => m.kind)).toContain("resync");
    expect(r.state).toBe("diverged");
    expect(r.eligible).toBe(false);
  });
});
